//! The range of load levels from CPU service demands (AutoPerf section
//! 2.1.2): the minimum level by the utilisation law, and the maximum by
//! Kleinrock's saturation number (eq. 3).
//!
//! **Stations.** Eq. 3 sums demands over *queueing stations*. A tier (one
//! host's CPUs) may run several measured processes (a web server and its
//! workers); they queue for the same cores, so a station's demand is the sum
//! of its processes' demands and its core count is the tier's. The paper's
//! bottleneck is `τ_b = max_i τ_i` with `n_cores^b` cores; with tiers of
//! different sizes the tier that saturates first is the one with the largest
//! demand *per core*, `max_i τ_i / n_i`, which is what we use. With equal core
//! counts the two agree.
//!
//! **Shared hosts.** Tiers measured on one host whose cores add up to more
//! than the host has take turns on the same CPUs: they are one station
//! (`web+db`) with the host's cores, as the queueing model takes them
//! (`model::network`), so the analysis reports one N* and one bottleneck.

/// The CPU demand of one measured process, as the search receives it.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct TierDemand {
    pub tier: String,
    pub process: String,
    /// Seconds of CPU per request (`τ_p`).
    pub demand_s: f64,
    /// Cores of the tier (its `cores:`, else its host's).
    pub cores: u32,
    /// The host it runs on (its agent); "" when unknown, never shared.
    pub host: String,
    /// The host's cores (0 when unknown).
    pub host_cores: u32,
    /// Of the time the process was ready to run at this level, the share
    /// it waited for a CPU (0 when unknown): what it wanted beyond what it
    /// got, on a host shared with others.
    pub cpu_wait_share: f64,
}

/// One queueing station of eq. 3: a tier, its processes' demands summed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Station {
    pub tier: String,
    pub demand_s: f64,
    pub cores: u32,
    /// The process with the largest demand in the tier.
    pub top_process: String,
}

impl Station {
    /// Demand per core: the busy fraction of the tier per unit of throughput.
    pub(crate) fn demand_per_core_s(&self) -> f64 {
        self.demand_s / self.cores.max(1) as f64
    }
}

/// Groups process demands into stations, in order of first appearance: a
/// tier's processes together, and tiers that share a host's cores together.
/// Negative or non-finite demands count as zero.
pub(crate) fn stations(demands: &[TierDemand]) -> Vec<Station> {
    // Per tier: its station, its largest process demand, its host.
    let mut tiers: Vec<(Station, f64, &str, u32)> = Vec::new();
    for d in demands {
        let tau = if d.demand_s.is_finite() {
            d.demand_s.max(0.0)
        } else {
            0.0
        };
        match tiers.iter_mut().find(|(s, ..)| s.tier == d.tier) {
            Some((s, top, ..)) => {
                s.demand_s += tau;
                s.cores = s.cores.max(d.cores);
                if tau > *top {
                    *top = tau;
                    s.top_process = d.process.clone();
                }
            }
            None => tiers.push((
                Station {
                    tier: d.tier.clone(),
                    demand_s: tau,
                    cores: d.cores.max(1),
                    top_process: d.process.clone(),
                },
                tau,
                &d.host,
                d.host_cores,
            )),
        }
    }
    let mut out: Vec<Station> = Vec::new();
    let mut merged = vec![false; tiers.len()];
    for i in 0..tiers.len() {
        if merged[i] {
            continue;
        }
        let (_, _, host, host_cores) = tiers[i];
        let group: Vec<usize> = (i..tiers.len())
            .filter(|&j| !host.is_empty() && tiers[j].2 == host)
            .collect();
        let wanted: u32 = group.iter().map(|&j| tiers[j].0.cores).sum();
        if group.len() < 2 || host_cores == 0 || wanted <= host_cores {
            out.push(tiers[i].0.clone());
            continue;
        }
        // The busiest process of the busiest tier names the station.
        let top = group
            .iter()
            .copied()
            .max_by(|&a, &b| tiers[a].1.total_cmp(&tiers[b].1).then(b.cmp(&a)))
            .unwrap_or(i);
        out.push(Station {
            tier: group
                .iter()
                .map(|&j| tiers[j].0.tier.as_str())
                .collect::<Vec<_>>()
                .join("+"),
            demand_s: group.iter().map(|&j| tiers[j].0.demand_s).sum(),
            cores: host_cores.min(wanted),
            top_process: tiers[top].0.top_process.clone(),
        });
        for j in group {
            merged[j] = true;
        }
    }
    out
}

/// The station with the largest demand per core (the first on a tie);
/// `None` when no station has a positive demand.
pub(crate) fn bottleneck(stations: &[Station]) -> Option<&Station> {
    stations.iter().filter(|s| s.demand_s > 0.0).fold(
        None,
        |best: Option<&Station>, s| match best {
            Some(b) if b.demand_per_core_s() >= s.demand_per_core_s() => Some(b),
            _ => Some(s),
        },
    )
}

/// Utilisation law at the bottleneck: `U_b = X · τ_b / n_b` (a fraction of
/// its cores).
pub(crate) fn bottleneck_utilisation(throughput_rps: f64, demands: &[TierDemand]) -> Option<f64> {
    let st = stations(demands);
    bottleneck(&st).map(|b| throughput_rps * b.demand_per_core_s())
}

/// The minimum level (2.1.2): the users that keep the bottleneck `ρ_min`
/// busy, `N_min ≈ (R(L) + γ)/τ_b(L) × ρ_min × n_cores`, with `R` and `τ_b`
/// measured at the current level `L` standing in for their values at `N_min`.
pub(crate) fn n_min(
    response_time_s: f64,
    think_s: f64,
    demands: &[TierDemand],
    rho_min: f64,
) -> Option<f64> {
    let st = stations(demands);
    let b = bottleneck(&st)?;
    Some((response_time_s.max(0.0) + think_s.max(0.0)) / b.demand_per_core_s() * rho_min)
}

/// Kleinrock's saturation number (eq. 3):
/// `N* = (γ + Σ_i τ_i)/τ_b × n_cores^b`, where the closed network's two
/// asymptotes, `X = N/(γ + Σ τ_i)` and `X = n_b/τ_b`, cross.
pub(crate) fn n_star(think_s: f64, demands: &[TierDemand]) -> Option<f64> {
    let st = stations(demands);
    let b = bottleneck(&st)?;
    let total: f64 = st.iter().map(|s| s.demand_s).sum();
    Some((think_s.max(0.0) + total) / b.demand_per_core_s())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(tier: &str, process: &str, demand_s: f64, cores: u32) -> TierDemand {
        TierDemand {
            tier: tier.into(),
            process: process.into(),
            demand_s,
            cores,
            ..Default::default()
        }
    }

    #[test]
    fn kleinrock_saturation_number_of_the_two_tier_example() {
        // D_web = 4 ms on 1 core, D_db = 1 ms, Z = 0.5 s: N* = 0.505/0.004.
        let demands = [d("web", "tb-web", 0.004, 1), d("db", "tb-db", 0.001, 1)];
        assert!((n_star(0.5, &demands).unwrap() - 126.25).abs() < 1e-9);
        // Two cores at the bottleneck double it.
        let demands = [d("web", "tb-web", 0.004, 2), d("db", "tb-db", 0.001, 1)];
        assert!((n_star(0.5, &demands).unwrap() - 252.5).abs() < 1e-9);
        assert_eq!(n_star(0.5, &[]), None);
        assert_eq!(n_star(0.5, &[d("web", "w", 0.0, 1)]), None);
    }

    #[test]
    fn minimum_level_by_the_utilisation_law() {
        let demands = [d("web", "tb-web", 0.004, 1), d("db", "tb-db", 0.001, 1)];
        // (0.005 + 0.5)/0.004 × 0.1 = 12.6 users keep web 10% busy.
        let n = n_min(0.005, 0.5, &demands, 0.1).unwrap();
        assert!((n - 12.625).abs() < 1e-9);
        // Check with the utilisation law: 12.625/0.505 req/s × 4 ms = 0.1.
        let u = bottleneck_utilisation(12.625 / 0.505, &demands).unwrap();
        assert!((u - 0.1).abs() < 1e-9);
    }

    #[test]
    fn processes_of_a_tier_share_its_cores_and_the_bottleneck_is_per_core() {
        let demands = [
            d("web", "nginx", 0.001, 4),
            d("web", "php-fpm", 0.006, 4),
            d("db", "mysqld", 0.003, 1),
        ];
        let st = stations(&demands);
        assert_eq!(st.len(), 2);
        assert!((st[0].demand_s - 0.007).abs() < 1e-12);
        assert_eq!(st[0].top_process, "php-fpm");
        // web: 7 ms over 4 cores = 1.75 ms/core; db: 3 ms on 1 core wins.
        let b = bottleneck(&st).unwrap();
        assert_eq!((b.tier.as_str(), b.top_process.as_str()), ("db", "mysqld"));
    }

    #[test]
    fn tiers_sharing_a_hosts_cores_are_one_station_with_one_n_star() {
        // Three tiers on one 2-core host, each free to use both cores.
        let on = |tier: &str, p: &str, demand_s: f64| TierDemand {
            host: "http://agent:9870".into(),
            host_cores: 2,
            ..d(tier, p, demand_s, 2)
        };
        let demands = [
            on("web", "nginx", 0.002),
            on("app", "java", 0.006),
            on("db", "mysqld", 0.004),
        ];
        let st = stations(&demands);
        assert_eq!(st.len(), 1);
        assert_eq!((st[0].tier.as_str(), st[0].cores), ("web+app+db", 2));
        assert_eq!(st[0].top_process, "java");
        // N* = (Z + 12 ms) · 2 / 12 ms: the host saturates, not `app` alone
        // (which would say (Z + 12 ms) · 2 / 6 ms, twice as many).
        assert!((n_star(0.1, &demands).unwrap() - 0.112 * 2.0 / 0.012).abs() < 1e-9);
        // Limited to a core each, they fit in the host's: three stations.
        let apart: Vec<TierDemand> = demands
            .iter()
            .map(|t| TierDemand {
                cores: 1,
                host_cores: 3,
                ..t.clone()
            })
            .collect();
        assert_eq!(stations(&apart).len(), 3);
        // A host not known is never shared.
        let unknown: Vec<TierDemand> = demands
            .iter()
            .map(|t| TierDemand {
                host_cores: 0,
                ..t.clone()
            })
            .collect();
        assert_eq!(stations(&unknown).len(), 3);
    }
}
