//! What the model predicts: per user count (closed) or arrival rate (open),
//! throughput, response time overall and per request class, utilisation
//! per tier and process, the bottleneck; the asymptotic bounds; and, for a
//! capacity analysis, the model against what was measured. Also what a
//! prediction covers when not told: which user counts, and which measured
//! levels it is set against.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod classes;
mod compare;

pub(crate) use compare::compare;

pub use classes::{ClassComparison, ClassPoint};

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
    /// The scenario's workload classes, each a class of the network.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub classes: BTreeMap<String, ClassInfo>,
}

/// A workload class in the model.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClassInfo {
    pub share: f64,
    pub think_time_s: f64,
    /// CPU ms per request of the class's mix, per tier.
    pub cpu_ms_per_request: BTreeMap<String, f64>,
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
    /// Each workload class (a scenario with `classes:`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub per_class: BTreeMap<String, ClassPoint>,
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
    /// The 95% half-width of the measured throughput (`ci95`), when the
    /// level had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_throughput_ci95_rps: Option<f64>,
    /// The model's throughput lies inside that interval: a difference the
    /// level's own noise explains, agreement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_interval: Option<bool>,
    /// Each workload class, at the users the level gave it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub per_class: BTreeMap<String, ClassComparison>,
}

/// How well the model followed the levels it describes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Fit {
    /// RMS of the relative errors.
    pub throughput_rms: f64,
    pub response_time_rms: f64,
    pub levels: usize,
    /// Of those, the levels with a 95% interval, and how many of them hold
    /// the model's throughput inside it.
    pub with_interval: usize,
    pub within_interval: usize,
    /// The median of their throughputs' relative half-widths.
    pub median_precision: Option<f64>,
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
    pub(crate) fn fit(&self) -> Option<Fit> {
        let trusted: Vec<&Comparison> = self
            .measured
            .iter()
            .filter(|c| !c.model_untrusted)
            .collect();
        let rms = |f: fn(&Comparison) -> f64| {
            (trusted.iter().map(|c| f(c).powi(2)).sum::<f64>() / trusted.len() as f64).sqrt()
        };
        let mut precision: Vec<f64> = trusted
            .iter()
            .filter_map(|c| {
                let half = c.measured_throughput_ci95_rps?;
                (c.measured_throughput_rps > 0.0).then(|| half / c.measured_throughput_rps)
            })
            .collect();
        precision.sort_by(f64::total_cmp);
        (!trusted.is_empty()).then(|| Fit {
            throughput_rms: rms(|c| c.throughput_error),
            response_time_rms: rms(|c| c.response_time_error),
            levels: trusted.len(),
            with_interval: trusted
                .iter()
                .filter(|c| c.within_interval.is_some())
                .count(),
            within_interval: trusted
                .iter()
                .filter(|c| c.within_interval == Some(true))
                .count(),
            median_precision: (!precision.is_empty()).then(|| precision[precision.len() / 2]),
        })
    }

    /// The users of the measured levels the model does not describe for a
    /// cause it does not know, as text ("300, 340").
    pub(crate) fn untrusted_users(&self) -> Option<String> {
        self.users_where(|c| c.model_untrusted && c.short_of_cpu.is_none())
    }

    /// The users of the measured levels the model does not describe
    /// because their servers were short of CPU, as text.
    pub(crate) fn short_of_cpu_users(&self) -> Option<String> {
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
pub(crate) const UNTRUSTED_GAP: f64 = 0.15;

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
pub(crate) fn bounds(model: &Model) -> Bounds {
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

pub(crate) fn info(model: &Model, kind: &str) -> ModelInfo {
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
        classes: model
            .user_classes
            .iter()
            .map(|c| {
                let demand = c.demand_s(model);
                let info = ClassInfo {
                    share: round6(c.share),
                    think_time_s: round6(c.think_s),
                    cpu_ms_per_request: model
                        .tiers
                        .iter()
                        .zip(demand)
                        .map(|(t, d)| (t.name.clone(), (d * 1e7).round() / 1e4))
                        .collect(),
                };
                (c.name.clone(), info)
            })
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
        per_class: BTreeMap::new(),
    }
}

/// The closed network at each of `users` (ascending or not), by exact
/// single-class MVA; with workload classes, the users dealt to them by
/// their shares and solved by multi-class MVA.
pub(crate) fn closed(model: &Model, users: &[u32]) -> Vec<Point> {
    if !model.user_classes.is_empty() {
        let top = users.iter().copied().max().unwrap_or(0);
        let exact = crate::model::multiclass::exact_fits(&model.populations(top));
        return users
            .iter()
            .filter(|&&n| n > 0)
            .map(|&n| classes::point(model, &model.populations(n), exact))
            .collect();
    }
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
pub(crate) fn open(model: &Model, rates: &[f64]) -> Vec<Point> {
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
pub(crate) fn erlang_c(c: u32, a: f64) -> f64 {
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
    /// Users per workload class, in the model's order (`--class-users`).
    Classes(Vec<u32>),
}

const MULTI_CLASS: &str =
    "closed multi-class MVA (exact or Schweitzer; Seidmann's multi-server stations)";

/// The whole prediction: the model, its bounds, the points asked for and,
/// when `measured` levels are given (a capacity analysis, no what-if), the
/// model against them.
pub fn predict(model: &Model, ask: &Ask, measured: &[LevelRecord]) -> Prediction {
    // Arrivals send the classes' sessions in their shares, not the mix
    // closed users send: an open what-if is of that mix.
    let open_model;
    let model = match (ask, model.open_mix()) {
        (Ask::Rates(_), Some(mix)) => {
            open_model = Model {
                mix,
                user_classes: Vec::new(),
                ..model.clone()
            };
            &open_model
        }
        _ => model,
    };
    let (kind, points) = match ask {
        Ask::Users(users) if !model.user_classes.is_empty() => (MULTI_CLASS, closed(model, users)),
        Ask::Users(users) => (
            "closed MVA (exact, multi-server stations)",
            closed(model, users),
        ),
        Ask::Classes(population) => (
            MULTI_CLASS,
            vec![classes::point(
                model,
                population,
                crate::model::multiclass::exact_fits(population),
            )],
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

#[cfg(test)]
mod tests;
