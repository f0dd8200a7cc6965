//! Mean value analysis of closed product-form queueing networks: users
//! cycle between a think (delay) station and queueing stations, each visit
//! costing a service demand. Exact, single class, with multi-server
//! (load-dependent) stations solved through their marginal queue-length
//! probabilities (Lazowska et al., *Quantitative System Performance*,
//! ch. 8), so a four-core tier is four servers, not one server four times
//! as fast. Pure functions, tested against textbook tables. The capacity
//! search's guide (`guided.rs`) and `model::predict` both solve with it.

/// A station of the network.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Station {
    pub name: String,
    /// Identical servers sharing one queue (cores); 0 makes it a delay
    /// station (no queueing: think time, network latency).
    pub servers: u32,
    /// Service demand of one cycle, seconds.
    pub demand_s: f64,
}

impl Station {
    pub(crate) fn queue(name: &str, servers: u32, demand_s: f64) -> Station {
        Station {
            name: name.into(),
            servers,
            demand_s,
        }
    }
}

/// The model's answer at one population.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Solution {
    pub users: u32,
    /// Cycles per second.
    pub throughput: f64,
    /// Time per cycle at the queueing stations (think excluded).
    pub response_s: f64,
    /// Time per cycle spent at each station.
    pub residence_s: Vec<f64>,
    /// Mean customers at each station.
    pub queue: Vec<f64>,
    /// Busy servers at each station: `X · D_k`.
    pub utilization: Vec<f64>,
}

/// Exact MVA for every population 1..=`users`; `think_s` is the think
/// time per cycle.
pub(crate) fn exact(stations: &[Station], think_s: f64, users: u32) -> Vec<Solution> {
    let k = stations.len();
    // Marginal probabilities p[k][j] of j customers at multi-server
    // station k, for the population one below the current.
    let mut p: Vec<Vec<f64>> = vec![vec![1.0]; k];
    let mut q = vec![0.0; k];
    let mut out = Vec::with_capacity(users as usize);
    for n in 1..=users {
        let residence: Vec<f64> = stations
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let d = s.demand_s;
                match s.servers {
                    0 => d,
                    1 => d * (1.0 + q[i]),
                    c => {
                        // R = Σ_j j·D/α(j)·p(j−1 | n−1), α(j) = min(j, c).
                        (1..=n as usize)
                            .map(|j| j as f64 * d / (j.min(c as usize) as f64) * p[i][j - 1])
                            .sum()
                    }
                }
            })
            .collect();
        let r: f64 = residence.iter().sum();
        let x = n as f64 / (think_s + r);
        for (i, s) in stations.iter().enumerate() {
            q[i] = x * residence[i];
            if s.servers > 1 {
                let d = s.demand_s;
                let c = s.servers as usize;
                let mut next = vec![0.0; n as usize + 1];
                for j in 1..=n as usize {
                    next[j] = x * d / (j.min(c) as f64) * p[i][j - 1];
                }
                // Rounding makes the complement drift below zero at high
                // load; a probability cannot.
                next[0] = (1.0 - next[1..].iter().sum::<f64>()).max(0.0);
                p[i] = next;
            }
        }
        out.push(Solution {
            users: n,
            throughput: x,
            response_s: r,
            queue: q.clone(),
            utilization: stations.iter().map(|s| x * s.demand_s).collect(),
            residence_s: residence,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    /// Jain, *The Art of Computer Systems Performance Analysis*, Example
    /// 34.2 and Table 34.1: CPU (S 0.125 s, V 16), disk A (0.3 s, V 10),
    /// disk B (0.2 s, V 5), Z = 4 s. The table's figures to its three
    /// decimals.
    #[test]
    fn single_class_matches_jains_table_34_1() {
        let stations = [
            Station::queue("cpu", 1, 2.0),
            Station::queue("disk a", 1, 3.0),
            Station::queue("disk b", 1, 1.0),
        ];
        let s = exact(&stations, 4.0, 20);
        // (N, system response time, throughput, Q_cpu, Q_a, Q_b)
        let table = [
            (1, 6.000, 0.100, 0.200, 0.300, 0.100),
            (2, 7.400, 0.175, 0.421, 0.684, 0.193),
            (3, 9.088, 0.229, 0.651, 1.158, 0.273),
            (4, 11.051, 0.266, 0.878, 1.721, 0.338),
            (5, 13.256, 0.290, 1.088, 2.365, 0.388),
            (17, 47.045, 0.333, 1.974, 13.195, 0.499),
            (20, 56.016, 0.333, 1.991, 16.177, 0.500),
        ];
        for (n, r, x, qc, qa, qb) in table {
            let p = &s[n - 1];
            assert!(close(p.response_s, r, 0.0015), "N={n}: R {}", p.response_s);
            assert!(close(p.throughput, x, 0.0015), "N={n}: X {}", p.throughput);
            for (got, want) in p.queue.iter().zip([qc, qa, qb]) {
                assert!(close(*got, want, 0.0015), "N={n}: Q {got} against {want}");
            }
        }
        // Disk A saturates: X → 1/D_a, U_a → 1.
        assert!(close(s[19].utilization[1], 1.0, 0.002));
    }

    /// An M/M/c machine-repairman check: with no think time and c servers,
    /// c users never queue (R = D), and many users give X = c/D.
    #[test]
    fn multi_server_stations_are_servers_not_one_fast_server() {
        let four = [Station::queue("web", 4, 0.004)];
        let s = exact(&four, 0.0, 40);
        for n in 1..=4 {
            assert!(close(s[n - 1].response_s, 0.004, 1e-12), "N={n}");
        }
        assert!(close(s[39].throughput, 1000.0, 1e-6));
        // One server four times as fast would answer 4 users in 4 ms, not 4.
        let fast = exact(&[Station::queue("web", 1, 0.001)], 0.0, 4);
        assert!(close(fast[3].response_s, 0.004, 1e-12));
        // Machine repairman, 2 servers, D = 1, Z = 1, N = 3, solved as a
        // birth-death chain: j at the station, up-rates 3, 2, 1, down-rates
        // 1, 2, 2, so p = (1, 3, 3, 1.5)·2/17 and X = Σ min(j, 2)·p_j = 24/17.
        let s = exact(&[Station::queue("m", 2, 1.0)], 1.0, 3);
        assert!(
            close(s[2].throughput, 24.0 / 17.0, 1e-9),
            "{}",
            s[2].throughput
        );
    }
}
