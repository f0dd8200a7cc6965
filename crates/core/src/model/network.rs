//! The queueing network of a measured application: its tiers as CPU
//! stations, the request classes with their demands at each tier, the mix
//! of classes and the think time — built from a results directory's record
//! (a profile's per-request demand table, or a capacity analysis's
//! per-level demands) and changed by what-ifs (another mix, more cores, a
//! faster tier, another think time).
//!
//! A user cycles through one request and one think time, as autoperf's
//! users do, so one "average request" class carries the mix: its demand at
//! tier `k` is `D_k = Σ_c f_c · D_ck` with `f_c` the share of class `c`
//! among requests (the scenario's CBMG visit ratios, or `--mix`). The
//! throughput of each class is `f_c · X`, and by the arrival theorem a
//! class-`c` request spends `D_ck · R_k / D_k` at tier `k`.

use std::collections::BTreeMap;

use crate::record::{Mode, RunRecord};
use crate::scenario::Scenario;

/// The name of the station a capacity analysis fitted where no CPU
/// saturates (`analysis.hidden_bottleneck`): no tier is named so (tier
/// names have no spaces).
pub(crate) const HIDDEN_STATION: &str = "hidden station";

/// A tier: one CPU station of the network.
#[derive(Debug, Clone, PartialEq)]
pub struct Tier {
    pub name: String,
    /// Cores the tier may use at once (its servers in the model).
    pub cores: u32,
    /// The agent that measured it: tiers with one agent share a host.
    pub host: String,
}

/// The network and its workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// Request classes (the scenario's request names, or `mix` for a
    /// capacity analysis, whose demands are already of the mix).
    pub classes: Vec<String>,
    /// Share of each class among requests; sums to 1.
    pub mix: Vec<f64>,
    pub tiers: Vec<Tier>,
    /// `demand_s[class][tier]`: CPU seconds per request.
    pub demand_s: Vec<Vec<f64>>,
    /// `process_share[tier]`: each process's fraction of its tier's demand.
    pub process_share: Vec<BTreeMap<String, f64>>,
    /// Mean think time between a user's requests.
    pub think_s: f64,
    /// Host cores as the agents reported them, by agent.
    pub host_cores: BTreeMap<String, u32>,
    /// The scenario's workload classes (`classes:`), each its own class of
    /// the network; empty: one class of users carries `mix`.
    pub user_classes: Vec<UserClassModel>,
    /// With classes, the request mix of an open workload's arrivals (the
    /// classes' sessions in their shares), where `mix` is closed users'.
    pub arrival_mix: Vec<f64>,
}

/// A workload class as the model holds it: users who think `think_s`
/// between requests of their own mix.
#[derive(Debug, Clone, PartialEq)]
pub struct UserClassModel {
    pub name: String,
    /// Its share of the users, as the scenario sets it.
    pub share: f64,
    pub think_s: f64,
    /// Share of each of the model's request classes among its requests.
    pub mix: Vec<f64>,
}

impl UserClassModel {
    /// CPU seconds per request of this class at each tier.
    pub(crate) fn demand_s(&self, model: &Model) -> Vec<f64> {
        (0..model.tiers.len())
            .map(|t| {
                model
                    .demand_s
                    .iter()
                    .zip(&self.mix)
                    .map(|(d, f)| d[t] * f)
                    .sum()
            })
            .collect()
    }
}

/// Why a model could not be built or changed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("the results hold no measured demands: run `autoperf profile` (per request) or `autoperf capacity` with agents (`servers:` in the scenario) first")]
    NoDemands,
    #[error("--mix names `{0}`, which the profile did not measure (it has: {1})")]
    UnknownClass(String, String),
    #[error("--mix needs per-request demands, from `autoperf profile`: a capacity analysis measures the scenario's mix as a whole")]
    MixNeedsProfile,
    #[error("`{0}` is not a tier of the model (it has: {1})")]
    UnknownTier(String, String),
    #[error("{0}")]
    Invalid(String),
}

impl Model {
    /// The model of a profile's or capacity analysis's record; `scenario`
    /// (the one the record was measured with) gives the visit ratios, the
    /// think time and the cores configured per tier.
    pub fn from_record(record: &RunRecord, scenario: &Scenario) -> Result<Model, ModelError> {
        let mut tiers: Vec<Tier> = Vec::new();
        let mut host_cores = BTreeMap::new();
        for server in &scenario.servers {
            let measured = record
                .levels
                .iter()
                .rev()
                .find_map(|l| l.servers.get(&server.tier));
            let cores = server
                .cores
                .or(measured.map(|u| u.cores))
                .unwrap_or(1)
                .max(1);
            // The host's cores; records older than `host_cores` have them
            // only where the scenario left a tier's cores to the agent.
            match (measured, server.cores) {
                (Some(u), _) if u.host_cores > 0 => {
                    host_cores.insert(u.agent.clone(), u.host_cores);
                }
                (Some(u), None) => {
                    host_cores.insert(u.agent.clone(), u.cores);
                }
                _ => {}
            }
            if !tiers.iter().any(|t| t.name == server.tier) {
                tiers.push(Tier {
                    name: server.tier.clone(),
                    cores,
                    // The agent that measured it: `demo` runs the scenario
                    // with the agent it started, not the one written in it.
                    host: measured.map_or_else(|| server.agent.clone(), |u| u.agent.clone()),
                });
            }
        }
        let think_s = scenario.judged_think_time(None).mean().as_secs_f64();
        let mut shares = vec![BTreeMap::new(); tiers.len()];
        let (classes, mix, demand_s) = match (&record.analysis.profile, record.mode) {
            (Some(profile), _) => {
                let visits = scenario.expected_sent_visits();
                let mut classes = Vec::new();
                let mut weights = Vec::new();
                let mut demand_s = Vec::new();
                for (i, request) in scenario.requests.iter().enumerate() {
                    let Some(by_tier) = profile.demands.get(&request.name) else {
                        continue;
                    };
                    classes.push(request.name.clone());
                    weights.push(
                        visits
                            .get(i)
                            .copied()
                            .filter(|v| v.is_finite())
                            .unwrap_or(0.0),
                    );
                    demand_s.push(
                        tiers
                            .iter()
                            .enumerate()
                            .map(|(t, tier)| {
                                let Some(d) = by_tier.get(&tier.name) else {
                                    return 0.0;
                                };
                                for (p, ms) in &d.cpu_ms_per_process {
                                    *shares[t].entry(p.clone()).or_insert(0.0) += ms;
                                }
                                d.cpu_ms / 1e3
                            })
                            .collect(),
                    );
                }
                // Requests the session never visits (profiled alone) still
                // get a what-if share through --mix; with none visited, all
                // count alike.
                if weights.iter().sum::<f64>() <= 0.0 {
                    weights = vec![1.0; classes.len()];
                }
                (classes, weights, demand_s)
            }
            (None, Mode::Capacity | Mode::Demo) => {
                // The demands of every level whose demands converged, the
                // median per tier: robust to a level at the edges (too
                // little load, or past saturation). Invalid levels measured
                // errors, not demands.
                let mut per_tier: Vec<Vec<f64>> = vec![Vec::new(); tiers.len()];
                // Failing any converged level, the utilisation law's
                // figures of every level: a near-idle process (a lock-bound
                // system) may never converge, and they are still measured.
                let any_converged = record
                    .levels
                    .iter()
                    .any(|l| l.capacity.as_ref().is_some_and(|c| c.demands_converged));
                for level in record.levels.iter().filter(|l| l.invalid.is_none()) {
                    let Some(cap) = level
                        .capacity
                        .as_ref()
                        .filter(|c| c.demands_converged || !any_converged)
                    else {
                        continue;
                    };
                    for (t, tier) in tiers.iter().enumerate() {
                        let mut total = 0.0;
                        let mut seen = false;
                        for (key, ms) in &cap.demand_ms {
                            if let Some((name, process)) = key.split_once('/') {
                                if name == tier.name {
                                    total += ms;
                                    seen = true;
                                    *shares[t].entry(process.to_string()).or_insert(0.0) += ms;
                                }
                            }
                        }
                        if seen {
                            per_tier[t].push(total / 1e3);
                        }
                    }
                }
                if per_tier.iter().all(Vec::is_empty) {
                    return Err(ModelError::NoDemands);
                }
                let mut demands: Vec<f64> = per_tier.into_iter().map(median).collect();
                // The station the agents do not see, as the analysis
                // fitted it (a lock, a pool): without it the model's curve
                // runs on past the plateau measured.
                let hidden = record
                    .analysis
                    .capacity
                    .as_ref()
                    .and_then(|c| c.hidden_bottleneck.as_ref());
                if let Some(h) = hidden {
                    tiers.push(Tier {
                        name: HIDDEN_STATION.to_string(),
                        cores: 1,
                        host: HIDDEN_STATION.to_string(),
                    });
                    shares.push(BTreeMap::new());
                    demands.push(h.demand_ms / 1e3);
                }
                (vec!["mix".to_string()], vec![1.0], vec![demands])
            }
            (None, _) => return Err(ModelError::NoDemands),
        };
        if classes.is_empty() || demand_s.iter().flatten().all(|d: &f64| *d <= 0.0) {
            return Err(ModelError::NoDemands);
        }
        for share in &mut shares {
            let total: f64 = share.values().sum();
            for v in share.values_mut() {
                *v = if total > 0.0 { *v / total } else { 0.0 };
            }
        }
        let user_classes = match record.analysis.profile {
            Some(_) => user_classes(scenario, &classes),
            None => Vec::new(),
        };
        // With classes, the one "average" class (the bounds, N*) sends
        // each class's mix in its share of the requests at light load,
        // where a user of class c sends one per Z_c + D_c.
        let arrival_mix = match user_classes.is_empty() {
            true => Vec::new(),
            false => normalised(&mix),
        };
        let (mix, think_s) = match user_classes.is_empty() {
            true => (mix, think_s),
            false => light_load_mix(&user_classes, &demand_s),
        };
        Ok(Model {
            classes,
            mix: normalised(&mix),
            tiers,
            demand_s,
            process_share: shares,
            think_s,
            host_cores,
            user_classes,
            arrival_mix,
        })
    }

    /// The arrivals' request mix, when it differs from `mix` (classes).
    pub(crate) fn open_mix(&self) -> Option<Vec<f64>> {
        (!self.arrival_mix.is_empty()).then(|| self.arrival_mix.clone())
    }

    /// Every user thinking `think_s` (`--think`): with classes, each
    /// class's, and the mix their requests make at light load with it.
    pub fn with_think(mut self, think_s: f64) -> Model {
        self.think_s = think_s;
        for class in &mut self.user_classes {
            class.think_s = think_s;
        }
        if !self.user_classes.is_empty() {
            (self.mix, self.think_s) = light_load_mix(&self.user_classes, &self.demand_s);
        }
        self
    }

    /// Users per workload class for `users` in all, dealt by the classes'
    /// shares as the generator deals them.
    pub(crate) fn populations(&self, users: u32) -> Vec<u32> {
        let shares: Vec<f64> = self.user_classes.iter().map(|c| c.share).collect();
        crate::scenario::users_per_class(&shares, users)
    }

    /// The populations `--class-users NAME=N,…` names (classes not named
    /// get none).
    pub fn class_population(&self, users: &[(String, u32)]) -> Result<Vec<u32>, ModelError> {
        if self.user_classes.is_empty() {
            return Err(ModelError::Invalid(
                "--class-users needs a profile (`autoperf profile`) of a scenario with `classes:` that measured requests of every class".into(),
            ));
        }
        let mut population = vec![0; self.user_classes.len()];
        for (name, n) in users {
            let Some(c) = self.user_classes.iter().position(|c| &c.name == name) else {
                let names: Vec<&str> = self.user_classes.iter().map(|c| c.name.as_str()).collect();
                return Err(ModelError::Invalid(format!(
                    "--class-users names `{name}`, which is not a class of the scenario (it has: {})",
                    names.join(", ")
                )));
            };
            population[c] = *n;
        }
        if population.iter().all(|&n| n == 0) {
            return Err(ModelError::Invalid(
                "--class-users: no users in any class".into(),
            ));
        }
        Ok(population)
    }

    /// Another request mix: `shares` by class name, normalised to 1;
    /// classes not named get none.
    pub fn with_mix(mut self, shares: &[(String, f64)]) -> Result<Model, ModelError> {
        if self.classes == ["mix"] {
            return Err(ModelError::MixNeedsProfile);
        }
        let mut mix = vec![0.0; self.classes.len()];
        for (name, share) in shares {
            let Some(i) = self.classes.iter().position(|c| c == name) else {
                return Err(ModelError::UnknownClass(
                    name.clone(),
                    self.classes.join(", "),
                ));
            };
            mix[i] = *share;
        }
        let total: f64 = mix.iter().sum();
        if total <= 0.0 {
            return Err(ModelError::Invalid("--mix: the shares add up to 0".into()));
        }
        self.mix = mix.into_iter().map(|m| m / total).collect();
        // Requests in the shares given: one class of users sends them.
        self.user_classes.clear();
        self.arrival_mix.clear();
        Ok(self)
    }

    fn tier_index(&self, name: &str) -> Result<usize, ModelError> {
        self.tiers
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = self.tiers.iter().map(|t| t.name.as_str()).collect();
                ModelError::UnknownTier(name.into(), names.join(", "))
            })
    }

    /// `tier` with `cores` cores.
    pub fn with_cores(mut self, tier: &str, cores: u32) -> Result<Model, ModelError> {
        if cores == 0 {
            return Err(ModelError::Invalid(format!(
                "--cores {tier}=0: a tier needs at least one core"
            )));
        }
        let t = self.tier_index(tier)?;
        self.tiers[t].cores = cores;
        Ok(self)
    }

    /// `tier`'s CPU `factor` times faster: its demands divided by it.
    pub fn with_speedup(mut self, tier: &str, factor: f64) -> Result<Model, ModelError> {
        if !(factor > 0.0 && factor.is_finite()) {
            return Err(ModelError::Invalid(format!(
                "--speedup {tier}={factor}: expected a factor above 0"
            )));
        }
        let t = self.tier_index(tier)?;
        for d in &mut self.demand_s {
            d[t] /= factor;
        }
        Ok(self)
    }

    /// The mix's demand per request at each tier, `Σ_c f_c · D_ck`.
    pub(crate) fn mean_demand_s(&self) -> Vec<f64> {
        (0..self.tiers.len())
            .map(|t| {
                self.demand_s
                    .iter()
                    .zip(&self.mix)
                    .map(|(d, f)| d[t] * f)
                    .sum()
            })
            .collect()
    }

    /// The CPU stations: one per tier, except that tiers on one host whose
    /// cores add up to more than the host has are one station with the
    /// host's cores, since they take turns on the same CPUs. Returns, per
    /// station, the tiers it holds.
    pub(crate) fn stations(&self) -> Vec<Vec<usize>> {
        let mut by_host: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (t, tier) in self.tiers.iter().enumerate() {
            by_host.entry(tier.host.as_str()).or_default().push(t);
        }
        let mut stations = Vec::new();
        for (t, tier) in self.tiers.iter().enumerate() {
            let group = &by_host[tier.host.as_str()];
            let wanted: u32 = group.iter().map(|&i| self.tiers[i].cores).sum();
            let shared = group.len() > 1
                && self
                    .host_cores
                    .get(&tier.host)
                    .is_some_and(|&host| wanted > host);
            if !shared {
                stations.push(vec![t]);
            } else if group[0] == t {
                stations.push(group.clone());
            }
        }
        stations
    }

    /// Servers of a station: its tier's cores, or the host's for tiers
    /// that share it.
    pub(crate) fn station_cores(&self, station: &[usize]) -> u32 {
        match station {
            [t] => self.tiers[*t].cores,
            group => {
                let host = &self.tiers[group[0]].host;
                let wanted: u32 = group.iter().map(|&i| self.tiers[i].cores).sum();
                self.host_cores
                    .get(host)
                    .copied()
                    .unwrap_or(wanted)
                    .min(wanted)
            }
        }
    }
}

fn normalised(weights: &[f64]) -> Vec<f64> {
    let total: f64 = weights.iter().sum();
    weights.iter().map(|w| w / total).collect()
}

/// The request mix and think time of users of `classes` taken as one:
/// each class's mix weighted by its requests at light load (its share
/// over `Z_c + D_c`, `D_c` its CPU per request summed over tiers).
fn light_load_mix(classes: &[UserClassModel], demand_s: &[Vec<f64>]) -> (Vec<f64>, f64) {
    let weights: Vec<f64> = classes
        .iter()
        .map(|c| {
            let d: f64 = demand_s
                .iter()
                .zip(&c.mix)
                .map(|(d, f)| f * d.iter().sum::<f64>())
                .sum();
            c.share / (c.think_s + d).max(1e-9)
        })
        .collect();
    let total: f64 = weights.iter().sum();
    let mut mix = vec![0.0; demand_s.len()];
    let mut think = 0.0;
    for (c, w) in classes.iter().zip(&weights) {
        for (m, f) in mix.iter_mut().zip(&c.mix) {
            *m += w / total * f;
        }
        think += w / total * c.think_s;
    }
    (mix, think)
}

/// The scenario's workload classes over the profiled requests `profiled`
/// (a model's request classes): each class's visits to them, as shares.
/// None when some class sends none of them (a profile of some requests
/// only): the model is then one class of the mix.
fn user_classes(scenario: &Scenario, profiled: &[String]) -> Vec<UserClassModel> {
    let mut out = Vec::new();
    for (c, class) in scenario.classes.iter().enumerate() {
        let visits = scenario.expected_sent_visits_of(c);
        let weights: Vec<f64> = profiled
            .iter()
            .map(|name| {
                scenario
                    .request_id(name)
                    .and_then(|id| visits.get(id.index()).copied())
                    .filter(|v| v.is_finite())
                    .unwrap_or(0.0)
            })
            .collect();
        let total: f64 = weights.iter().sum();
        if total <= 0.0 {
            return Vec::new();
        }
        out.push(UserClassModel {
            name: class.name.clone(),
            share: class.share,
            think_s: scenario.mean_think_time_of(c).as_secs_f64(),
            mix: weights.iter().map(|w| w / total).collect(),
        });
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The testbed's capacity fixture as `demo` records it: the scenario
    /// text names the agent it was written with, the levels the agent that
    /// measured them (started by `demo` on a free port), on a 2-core host.
    fn demo_like() -> (RunRecord, Scenario) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/report/html/testdata/capacity/run.json");
        let mut record: RunRecord =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        record.scenario.text = record
            .scenario
            .text
            .replace("http://127.0.0.1:19871", "http://127.0.0.1:9870");
        for level in &mut record.levels {
            for usage in level.servers.values_mut() {
                usage.host_cores = 2;
            }
        }
        let scenario = crate::scenario::parse(
            &record.scenario.text,
            std::path::Path::new(&record.scenario.file),
        )
        .unwrap();
        (record, scenario)
    }

    #[test]
    fn tiers_measured_by_one_agent_share_its_host_whatever_the_scenario_says() {
        let (record, scenario) = demo_like();
        let model = Model::from_record(&record, &scenario).unwrap();
        // One core each fits the host's two: two stations.
        assert_eq!(model.stations().len(), 2);
        // Two cores for web and one for db do not: web and db take turns
        // on the host's two cores.
        let model = model.with_cores("web", 2).unwrap();
        let stations = model.stations();
        assert_eq!(stations.len(), 1, "{stations:?}");
        assert_eq!(model.station_cores(&stations[0]), 2);
    }
}
