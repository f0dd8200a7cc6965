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

/// The CPU demand of one measured process, as the search receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct TierDemand {
    pub tier: String,
    pub process: String,
    /// Seconds of CPU per request (`τ_p`).
    pub demand_s: f64,
    /// Cores of the tier's host.
    pub cores: u32,
}

/// One queueing station of eq. 3: a tier, its processes' demands summed.
#[derive(Debug, Clone, PartialEq)]
pub struct Station {
    pub tier: String,
    pub demand_s: f64,
    pub cores: u32,
    /// The process with the largest demand in the tier.
    pub top_process: String,
}

impl Station {
    /// Demand per core: the busy fraction of the tier per unit of throughput.
    pub fn demand_per_core_s(&self) -> f64 {
        self.demand_s / self.cores.max(1) as f64
    }
}

/// Groups process demands into stations, in order of first appearance.
/// Negative or non-finite demands count as zero.
pub fn stations(demands: &[TierDemand]) -> Vec<Station> {
    let mut out: Vec<(Station, f64)> = Vec::new();
    for d in demands {
        let tau = if d.demand_s.is_finite() {
            d.demand_s.max(0.0)
        } else {
            0.0
        };
        match out.iter_mut().find(|(s, _)| s.tier == d.tier) {
            Some((s, top)) => {
                s.demand_s += tau;
                s.cores = s.cores.max(d.cores);
                if tau > *top {
                    *top = tau;
                    s.top_process = d.process.clone();
                }
            }
            None => out.push((
                Station {
                    tier: d.tier.clone(),
                    demand_s: tau,
                    cores: d.cores.max(1),
                    top_process: d.process.clone(),
                },
                tau,
            )),
        }
    }
    out.into_iter().map(|(s, _)| s).collect()
}

/// The station with the largest demand per core (the first on a tie);
/// `None` when no station has a positive demand.
pub fn bottleneck(stations: &[Station]) -> Option<&Station> {
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
pub fn bottleneck_utilisation(throughput_rps: f64, demands: &[TierDemand]) -> Option<f64> {
    let st = stations(demands);
    bottleneck(&st).map(|b| throughput_rps * b.demand_per_core_s())
}

/// The minimum level (2.1.2): the users that keep the bottleneck `ρ_min`
/// busy, `N_min ≈ (R(L) + γ)/τ_b(L) × ρ_min × n_cores`, with `R` and `τ_b`
/// measured at the current level `L` standing in for their values at `N_min`.
pub fn n_min(
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
pub fn n_star(think_s: f64, demands: &[TierDemand]) -> Option<f64> {
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
}
