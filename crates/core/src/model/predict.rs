//! What the model predicts: per user count (closed) or arrival rate (open),
//! throughput, response time overall and per request class, utilisation
//! per tier and process, the bottleneck; the asymptotic bounds; and, for a
//! capacity analysis, the model against what was measured. Also what a
//! prediction covers when not told: which user counts, and which measured
//! levels it is set against.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::memory::{self, MemoryFit};
use super::network::Model;
use crate::capacity::mva::{self, Station};
use crate::measure::{round6, round_to};
use crate::record::{round3, LevelRecord, RunRecord};

/// `prediction.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Prediction {
    pub model: ModelInfo,
    pub bounds: Bounds,
    pub points: Vec<Point>,
    /// The model at the measured levels of a capacity analysis.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub measured: Vec<Comparison>,
    /// Each tier's memory as a line in the users, fitted to the measured
    /// levels (`model::memory`): what the points' `memory_bytes` come from.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub memory: BTreeMap<String, MemoryFit>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModelInfo {
    /// "closed MVA (exact, multi-server stations)" or "open (M/M/c)".
    pub kind: String,
    pub think_time_s: f64,
    /// Share of each request class among requests.
    pub mix: BTreeMap<String, f64>,
    /// CPU ms per request of the mix, per tier, and the tier's cores.
    pub tiers: BTreeMap<String, TierInfo>,
    /// Tiers the model takes as one CPU station (they share a host's cores).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_hosts: Vec<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TierInfo {
    pub cores: u32,
    pub cpu_ms_per_request: f64,
}

/// The asymptotic bounds (Lazowska et al., ch. 5) at the bottleneck.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Bounds {
    /// `X ≤ cores_b / D_b`.
    pub max_throughput_rps: f64,
    /// `R ≥ Σ D_k`.
    pub min_response_time_ms: f64,
    /// Kleinrock's saturation number `N* = (Z + Σ D_k) · cores_b / D_b`.
    pub n_star: f64,
    pub bottleneck: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Point {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_rps: Option<f64>,
    pub throughput_rps: f64,
    pub response_time_ms: f64,
    pub per_request_ms: BTreeMap<String, f64>,
    /// Busy cores per tier.
    pub utilization: BTreeMap<String, f64>,
    /// Busy cores per process (`tier/process`).
    pub utilization_per_process: BTreeMap<String, f64>,
    pub bottleneck: String,
    /// Open what-ifs past the bottleneck's capacity have no steady state.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub saturated: bool,
    /// Each tier's resident memory at these users, from its fitted line
    /// (closed points of a record whose levels measured memory).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub memory_bytes: BTreeMap<String, u64>,
}

/// The model at one measured level.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    pub users: u32,
    pub measured_throughput_rps: f64,
    pub model_throughput_rps: f64,
    pub throughput_error: f64,
    pub measured_response_time_ms: f64,
    pub model_response_time_ms: f64,
    pub response_time_error: f64,
    /// Measured throughput short of the model by more than
    /// `UNTRUSTED_GAP`: something the model does not see (a lock, a pool,
    /// the network) limits the system, or the generator did.
    pub model_untrusted: bool,
    /// Why the servers had less CPU than they asked for at this level,
    /// when they did (`record::short_of_cpu`): a level the model cannot
    /// describe for a cause outside the system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_of_cpu: Option<String>,
}

/// How well the model followed the levels it describes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// RMS of the relative errors.
    pub throughput_rms: f64,
    pub response_time_rms: f64,
    pub levels: usize,
}

impl Prediction {
    /// Adds each tier's fitted memory line, and the memory it gives at
    /// every closed point.
    pub fn with_memory(mut self, fits: BTreeMap<String, MemoryFit>) -> Prediction {
        for p in &mut self.points {
            if let Some(users) = p.users {
                p.memory_bytes = fits.iter().map(|(t, f)| (t.clone(), f.at(users))).collect();
            }
        }
        self.memory = fits;
        self
    }

    /// The fit over the measured levels the model describes; `None` when
    /// there are none.
    pub fn fit(&self) -> Option<Fit> {
        let trusted: Vec<&Comparison> = self
            .measured
            .iter()
            .filter(|c| !c.model_untrusted)
            .collect();
        let rms = |f: fn(&Comparison) -> f64| {
            (trusted.iter().map(|c| f(c).powi(2)).sum::<f64>() / trusted.len() as f64).sqrt()
        };
        (!trusted.is_empty()).then(|| Fit {
            throughput_rms: rms(|c| c.throughput_error),
            response_time_rms: rms(|c| c.response_time_error),
            levels: trusted.len(),
        })
    }

    /// The users of the measured levels the model does not describe for a
    /// cause it does not know, as text ("300, 340").
    pub fn untrusted_users(&self) -> Option<String> {
        self.users_where(|c| c.model_untrusted && c.short_of_cpu.is_none())
    }

    /// The users of the measured levels the model does not describe
    /// because their servers were short of CPU, as text.
    pub fn short_of_cpu_users(&self) -> Option<String> {
        self.users_where(|c| c.model_untrusted && c.short_of_cpu.is_some())
    }

    fn users_where(&self, which: impl Fn(&Comparison) -> bool) -> Option<String> {
        let users: Vec<String> = self
            .measured
            .iter()
            .filter(|c| which(c))
            .map(|c| c.users.to_string())
            .collect();
        (!users.is_empty()).then(|| users.join(", "))
    }
}

/// Measured throughput this far below the model's marks a level the model
/// does not describe.
pub const UNTRUSTED_GAP: f64 = 0.15;

fn stations(model: &Model) -> (Vec<Vec<usize>>, Vec<Station>) {
    let groups = model.stations();
    let demand = model.mean_demand_s();
    let stations = groups
        .iter()
        .map(|g| {
            let name: Vec<&str> = g.iter().map(|&t| model.tiers[t].name.as_str()).collect();
            Station::queue(
                &name.join("+"),
                model.station_cores(g),
                g.iter().map(|&t| demand[t]).sum(),
            )
        })
        .collect();
    (groups, stations)
}

/// The bounds of `model`.
pub fn bounds(model: &Model) -> Bounds {
    let (_, stations) = stations(model);
    let total: f64 = stations.iter().map(|s| s.demand_s).sum();
    let (b, per_core) = stations
        .iter()
        .enumerate()
        .map(|(i, s)| (i, s.demand_s / s.servers.max(1) as f64))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or((0, 0.0));
    Bounds {
        max_throughput_rps: if per_core > 0.0 {
            round3(1.0 / per_core)
        } else {
            f64::INFINITY
        },
        min_response_time_ms: round3(total * 1e3),
        n_star: if per_core > 0.0 {
            round_to((model.think_s + total) / per_core, 1)
        } else {
            0.0
        },
        bottleneck: stations.get(b).map_or(String::new(), |s| s.name.clone()),
    }
}

pub fn info(model: &Model, kind: &str) -> ModelInfo {
    let demand = model.mean_demand_s();
    let groups = model.stations();
    ModelInfo {
        kind: kind.into(),
        think_time_s: model.think_s,
        mix: model
            .classes
            .iter()
            .cloned()
            .zip(model.mix.iter().map(|&m| round6(m)))
            .collect(),
        tiers: model
            .tiers
            .iter()
            .zip(&demand)
            .map(|(t, d)| {
                (
                    t.name.clone(),
                    TierInfo {
                        cores: t.cores,
                        cpu_ms_per_request: (d * 1e7).round() / 1e4,
                    },
                )
            })
            .collect(),
        shared_hosts: groups
            .iter()
            .filter(|g| g.len() > 1)
            .map(|g| g.iter().map(|&t| model.tiers[t].name.clone()).collect())
            .collect(),
    }
}

/// A point from a station-level solution: tiers sharing a station split
/// its utilisation and residence in proportion to their demands.
fn point(
    model: &Model,
    groups: &[Vec<usize>],
    stations: &[Station],
    x: f64,
    residence_s: &[f64],
) -> Point {
    let demand = model.mean_demand_s();
    let mut utilization = BTreeMap::new();
    let mut per_process = BTreeMap::new();
    // Time per unit of demand at each tier: the station's stretch factor.
    let mut stretch = vec![1.0; model.tiers.len()];
    for (g, s) in groups.iter().zip(stations.iter().zip(residence_s)) {
        let (station, r) = s;
        let d = station.demand_s;
        for &t in g {
            stretch[t] = if d > 0.0 { r / d } else { 1.0 };
            let u = x * demand[t];
            utilization.insert(model.tiers[t].name.clone(), round3(u));
            for (p, share) in &model.process_share[t] {
                per_process.insert(format!("{}/{p}", model.tiers[t].name), round3(u * share));
            }
        }
    }
    let r: f64 = residence_s.iter().sum();
    let per_request_ms = model
        .classes
        .iter()
        .zip(&model.demand_s)
        .map(|(c, d)| {
            let ms: f64 = d.iter().zip(&stretch).map(|(d, s)| d * s).sum::<f64>() * 1e3;
            (c.clone(), round3(ms))
        })
        .collect();
    let bottleneck = stations
        .iter()
        .max_by(|a, b| {
            (a.demand_s / a.servers.max(1) as f64)
                .total_cmp(&(b.demand_s / b.servers.max(1) as f64))
        })
        .map_or(String::new(), |s| s.name.clone());
    Point {
        users: None,
        rate_rps: None,
        throughput_rps: round3(x),
        response_time_ms: round3(r * 1e3),
        per_request_ms,
        utilization,
        utilization_per_process: per_process,
        bottleneck,
        saturated: false,
        memory_bytes: BTreeMap::new(),
    }
}

/// The closed network at each of `users` (ascending or not), by exact
/// single-class MVA.
pub fn closed(model: &Model, users: &[u32]) -> Vec<Point> {
    let (groups, stations) = stations(model);
    let top = users.iter().copied().max().unwrap_or(0);
    let solved = mva::exact(&stations, model.think_s, top);
    users
        .iter()
        .filter(|&&n| n > 0)
        .map(|&n| {
            let s = &solved[n as usize - 1];
            let mut p = point(model, &groups, &stations, s.throughput, &s.residence_s);
            p.users = Some(n);
            p
        })
        .collect()
}

/// The open network at each arrival rate: M/M/c stations (Erlang C).
pub fn open(model: &Model, rates: &[f64]) -> Vec<Point> {
    let (groups, stations) = stations(model);
    rates
        .iter()
        .map(|&rate| {
            let mut saturated = false;
            let residence: Vec<f64> = stations
                .iter()
                .map(|s| {
                    let d = s.demand_s;
                    let c = s.servers.max(1);
                    let rho = rate * d / c as f64;
                    if rho >= 1.0 {
                        saturated = true;
                        return f64::INFINITY;
                    }
                    // R = D + C(c, a) · (D/c) / (1 − ρ), a = λ·D.
                    d + erlang_c(c, rate * d) * (d / c as f64) / (1.0 - rho)
                })
                .collect();
            let mut p = point(model, &groups, &stations, rate, &residence);
            p.rate_rps = Some(rate);
            p.saturated = saturated;
            if saturated {
                p.response_time_ms = f64::MAX;
                p.per_request_ms.values_mut().for_each(|v| *v = f64::MAX);
            }
            p
        })
        .collect()
}

/// Erlang's C: the probability that an arrival waits at `c` servers
/// offered `a` erlangs (`a < c`).
pub fn erlang_c(c: u32, a: f64) -> f64 {
    // Erlang B by its recursion, then C = B / (1 − ρ(1 − B)).
    let mut b = 1.0;
    for k in 1..=c {
        b = a * b / (k as f64 + a * b);
    }
    let rho = a / c as f64;
    b / (1.0 - rho * (1.0 - b))
}

/// What to predict: user counts (closed) or arrival rates (open).
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    Users(Vec<u32>),
    Rates(Vec<f64>),
}

/// The whole prediction: the model, its bounds, the points asked for and,
/// when `measured` levels are given (a capacity analysis, no what-if), the
/// model against them.
pub fn predict(model: &Model, ask: &Ask, measured: &[LevelRecord]) -> Prediction {
    let (kind, points) = match ask {
        Ask::Users(users) => (
            "closed MVA (exact, multi-server stations)",
            closed(model, users),
        ),
        Ask::Rates(rates) => (
            "open network (M/M/c stations, Erlang C)",
            open(model, rates),
        ),
    };
    Prediction {
        model: info(model, kind),
        bounds: bounds(model),
        points,
        measured: compare(model, measured),
        memory: BTreeMap::new(),
    }
}

/// The prediction a capacity analysis adds to its results: the default
/// user counts, set against its closed levels that ran to the end (a level
/// Ctrl-C cut short measured a part of itself: neither a point to predict
/// nor one to compare).
pub fn of_analysis(model: &Model, levels: &[LevelRecord]) -> Prediction {
    let mut measured = closed_levels(levels);
    measured.retain(|l| !l.interrupted);
    let ask = Ask::Users(default_users(model, &measured));
    predict(model, &ask, &measured).with_memory(memory::fit(&measured))
}

/// The closed levels of `levels` (those with a user count; an open
/// level has a rate instead), which a prediction may be set against.
pub fn closed_levels(levels: &[LevelRecord]) -> Vec<LevelRecord> {
    levels
        .iter()
        .filter(|l| l.users.is_some())
        .cloned()
        .collect()
}

/// What a prediction from `record`'s demands is set against unless told:
/// its closed levels when it is a capacity analysis and the model is still
/// the system it measured (no `what_if` changed it); else nothing.
pub fn measured_levels(record: &RunRecord, what_if: bool) -> Vec<LevelRecord> {
    match what_if || record.analysis.capacity.is_none() {
        true => Vec::new(),
        false => closed_levels(&record.levels),
    }
}

/// User counts to predict for when not told: 1 to twice N* (at least the
/// largest measured level, and 10), in at most 200 steps, and every
/// measured level.
pub fn default_users(model: &Model, measured: &[LevelRecord]) -> Vec<u32> {
    let n_star = bounds(model).n_star;
    let top = measured
        .iter()
        .filter_map(|l| l.users)
        .max()
        .unwrap_or(0)
        .max((2.0 * n_star).ceil().min(100_000.0) as u32)
        .max(10);
    let mut users = user_steps(1, top, 200);
    users.extend(measured.iter().filter_map(|l| l.users));
    users.sort_unstable();
    users.dedup();
    users
}

/// User counts from 1 to `top`, at most `count` of them, evenly spaced.
pub fn user_steps(from: u32, to: u32, count: u32) -> Vec<u32> {
    let (from, to) = (from.max(1), to.max(from.max(1)));
    let step = (to - from).div_ceil(count.max(1)).max(1);
    let mut v: Vec<u32> = (from..=to).step_by(step as usize).collect();
    if v.last() != Some(&to) {
        v.push(to);
    }
    v
}

/// The model against a capacity analysis's measured levels.
pub fn compare(model: &Model, levels: &[LevelRecord]) -> Vec<Comparison> {
    let users: Vec<u32> = levels.iter().filter_map(|l| l.users).collect();
    let points = closed(model, &users);
    let mut levels: Vec<&LevelRecord> = levels.iter().collect();
    levels.sort_by_key(|l| l.users);
    levels
        .into_iter()
        .filter(|l| l.users.is_some_and(|u| u > 0) && !l.interrupted)
        .filter_map(|l| {
            let p = points.iter().find(|p| p.users == l.users)?;
            let rel = |model: f64, measured: f64| {
                if measured > 0.0 {
                    round_to((model - measured) / measured, 4)
                } else {
                    0.0
                }
            };
            Some(Comparison {
                users: l.users.unwrap_or(0),
                measured_throughput_rps: l.throughput_rps,
                model_throughput_rps: p.throughput_rps,
                throughput_error: rel(p.throughput_rps, l.throughput_rps),
                measured_response_time_ms: l.response_time_ms.mean,
                model_response_time_ms: p.response_time_ms,
                response_time_error: rel(p.response_time_ms, l.response_time_ms.mean),
                model_untrusted: {
                    // A short level's count is itself noisy: a Poisson
                    // count of n strays by √n, so three of those are not
                    // a limit the model misses.
                    let noise = 3.0 / (l.requests.max(1) as f64).sqrt();
                    l.throughput_rps < p.throughput_rps * (1.0 - UNTRUSTED_GAP.max(noise))
                },
                short_of_cpu: crate::record::short_of_cpu(&l.servers),
            })
        })
        .collect()
}

/// Root mean square of relative errors.
pub fn rms(errors: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = errors.fold((0.0, 0usize), |(s, n), e| (s + e * e, n + 1));
    if n == 0 {
        0.0
    } else {
        (sum / n as f64).sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::super::network::Tier;
    use super::*;

    fn testbed(web_cores: u32) -> Model {
        // The testbed's /db?web_ms=4&db_ms=1 at Z = 0.5 s (tests/it/capacity.rs).
        Model {
            classes: vec!["db".into()],
            mix: vec![1.0],
            tiers: vec![
                Tier {
                    name: "web".into(),
                    cores: web_cores,
                    host: "a".into(),
                },
                Tier {
                    name: "db".into(),
                    cores: 1,
                    host: "a".into(),
                },
            ],
            demand_s: vec![vec![0.004, 0.001]],
            process_share: vec![
                [("tb-web".to_string(), 1.0)].into(),
                [("tb-db".to_string(), 1.0)].into(),
            ],
            think_s: 0.5,
            host_cores: BTreeMap::new(),
        }
    }

    #[test]
    fn the_testbeds_known_saturation() {
        let m = testbed(1);
        let b = bounds(&m);
        assert_eq!(b.max_throughput_rps, 250.0);
        assert_eq!(b.n_star, 126.3);
        assert_eq!(b.bottleneck, "web");
        let p = closed(&m, &[1, 300]);
        // One user: no queueing, R = ΣD, X = 1/(Z + R).
        assert!((p[0].response_time_ms - 5.0).abs() < 1e-9);
        assert!((p[0].throughput_rps - 1.0 / 0.505).abs() < 1e-3);
        // Far past N*: X at the bound, the web tier's one core busy.
        assert!((p[1].throughput_rps - 250.0).abs() < 0.5);
        assert!((p[1].utilization["web"] - 1.0).abs() < 0.002);
        assert!((p[1].utilization_per_process["web/tb-web"] - 1.0).abs() < 0.002);
        // Twice the web cores: the bound moves to 500/s.
        let two = m.with_cores("web", 2).unwrap();
        assert_eq!(bounds(&two).max_throughput_rps, 500.0);
    }

    #[test]
    fn tiers_that_overbook_a_host_share_its_cores() {
        let mut m = testbed(2);
        m.tiers[1].cores = 2;
        m.host_cores.insert("a".into(), 2);
        assert_eq!(m.stations(), vec![vec![0, 1]]);
        // One 2-core station with D = 5 ms: X ≤ 400/s, not web's 500/s.
        assert_eq!(bounds(&m).max_throughput_rps, 400.0);
        let p = closed(&m, &[1000]);
        assert!((p[0].throughput_rps - 400.0).abs() < 1.0);
        // Four cores on the host: no sharing.
        m.host_cores.insert("a".into(), 4);
        assert_eq!(m.stations(), vec![vec![0], vec![1]]);
    }

    #[test]
    fn user_steps_cover_the_range() {
        assert_eq!(user_steps(1, 10, 4), vec![1, 4, 7, 10]);
        assert_eq!(user_steps(1, 3, 20), vec![1, 2, 3]);
        assert_eq!(user_steps(0, 0, 5), vec![1]);
    }

    #[test]
    fn open_what_ifs_use_erlang_c() {
        // M/M/1: C = ρ, R = D/(1 − ρ).
        assert!((erlang_c(1, 0.5) - 0.5).abs() < 1e-12);
        // M/M/2 at a = 1: C = 1/3.
        assert!((erlang_c(2, 1.0) - 1.0 / 3.0).abs() < 1e-12);
        let m = testbed(1);
        let p = open(&m, &[125.0, 300.0]);
        // web ρ = 0.5: 8 ms; db ρ = 0.125: 1/0.875 ms.
        assert!((p[0].response_time_ms - (8.0 + 1.0 / 0.875)).abs() < 1e-3);
        assert!(p[1].saturated);
    }

    fn fixture() -> RunRecord {
        serde_json::from_str(include_str!("../report/html/testdata/run/run.json")).unwrap()
    }

    /// The fixture's level at `users` (`None`: an open level).
    fn level(users: Option<u32>, interrupted: bool) -> LevelRecord {
        let mut l = fixture().levels.swap_remove(0);
        (l.users, l.interrupted) = (users, interrupted);
        l
    }

    #[test]
    fn default_users_reach_twice_n_star_and_every_measured_level() {
        let m = testbed(1);
        // N* = 126.3: 1 to 253, in steps of 2 (at most 200 counts).
        let users = default_users(&m, &[]);
        assert_eq!((users[0], users[1], users.len()), (1, 3, 127));
        // A measured level past 2·N* moves the top; each one is a point.
        let users = default_users(&m, &[level(Some(400), false), level(Some(6), false)]);
        assert!(users.ends_with(&[400]) && users.contains(&6), "{users:?}");
        // N* = 2 (no think time, two equal demands): still up to 10.
        let mut small = testbed(1);
        (small.think_s, small.demand_s) = (0.0, vec![vec![0.004, 0.004]]);
        assert_eq!(default_users(&small, &[]), (1..=10).collect::<Vec<_>>());
    }

    #[test]
    fn an_analysis_prediction_leaves_out_open_and_interrupted_levels() {
        let levels = [10, 20, 377].map(|u| level(Some(u), u == 377));
        let levels = [&levels[..], &[level(None, false)]].concat();
        assert_eq!(closed_levels(&levels).len(), 3);
        // A run that was no capacity analysis is compared with nothing.
        assert!(measured_levels(&fixture(), false).is_empty());
        let p = of_analysis(&testbed(1), &levels);
        let compared: Vec<u32> = p.measured.iter().map(|c| c.users).collect();
        assert_eq!(compared, [10, 20]);
        assert!(!p.points.iter().any(|p| p.users == Some(377)));
    }
}
