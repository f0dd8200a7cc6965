//! Mean value analysis of closed product-form queueing networks: users
//! cycle between a think (delay) station and queueing stations, each visit
//! costing a service demand. Pure functions, tested against textbook tables.
//!
//! - `exact`: one class, exact, with multi-server (load-dependent) stations
//!   solved through their marginal queue-length probabilities
//!   (Lazowska et al., *Quantitative System Performance*, ch. 8), so a
//!   four-core tier is four servers, not one server four times as fast.
//! - `exact_multi`: several classes, exact (the recursion over every
//!   population vector below the one asked: for a few classes only).
//! - `schweitzer`: several classes, approximate (Schweitzer's fixed point:
//!   a class-`c` arrival sees `Q_k·(N_c − 1)/N_c` of its own class), for
//!   many classes and many users.
//!
//! Multi-server stations in the multi-class solvers use Seidmann's
//! approximation: a `c`-server station of demand `D` becomes a queue of
//! demand `D/c` plus a delay of `D·(c−1)/c`. It is exact at low load and
//! in saturation and underestimates the queueing near the knee (by up to
//! ~10% of the response time for c = 2..8 in Seidmann et al.'s tables).

/// A station of the network.
#[derive(Debug, Clone, PartialEq)]
pub struct Station {
    pub name: String,
    /// Identical servers sharing one queue (cores); 0 makes it a delay
    /// station (no queueing: think time, network latency).
    pub servers: u32,
    /// Service demand of one cycle of each class, seconds.
    pub demands: Vec<f64>,
}

impl Station {
    pub fn queue(name: &str, servers: u32, demands: Vec<f64>) -> Station {
        Station {
            name: name.into(),
            servers,
            demands,
        }
    }

    fn is_delay(&self) -> bool {
        self.servers == 0
    }
}

/// The model's answer at one population.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    /// Users per class.
    pub population: Vec<u32>,
    /// Cycles per second per class.
    pub throughput: Vec<f64>,
    /// Time per cycle at the queueing stations per class (think excluded).
    pub response_s: Vec<f64>,
    /// `residence_s[station][class]`: time per cycle spent at a station.
    pub residence_s: Vec<Vec<f64>>,
    /// Mean customers at each station (all classes).
    pub queue: Vec<f64>,
    /// Busy servers at each station: `Σ_c X_c · D_ck`.
    pub utilization: Vec<f64>,
}

/// Exact single-class MVA for every population 1..=`users`; `think_s` is
/// the think time per cycle. Stations' `demands` hold one value.
pub fn exact(stations: &[Station], think_s: f64, users: u32) -> Vec<Solution> {
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
                let d = s.demands[0];
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
                let d = s.demands[0];
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
            population: vec![n],
            throughput: vec![x],
            response_s: vec![r],
            residence_s: residence.iter().map(|r| vec![*r]).collect(),
            queue: q.clone(),
            utilization: stations.iter().map(|s| x * s.demands[0]).collect(),
        });
    }
    out
}

/// Seidmann's split of a multi-server station into a one-server queue and
/// a delay (see the module doc).
fn seidmann(stations: &[Station]) -> Vec<Station> {
    let mut out = Vec::new();
    for s in stations {
        match s.servers {
            0 | 1 => out.push(s.clone()),
            c => {
                let c = c as f64;
                out.push(Station {
                    name: s.name.clone(),
                    servers: 1,
                    demands: s.demands.iter().map(|d| d / c).collect(),
                });
                out.push(Station {
                    name: format!("{} (delay)", s.name),
                    servers: 0,
                    demands: s.demands.iter().map(|d| d * (c - 1.0) / c).collect(),
                });
            }
        }
    }
    out
}

/// Folds the Seidmann split back onto the original stations.
fn unsplit(stations: &[Station], split: &Solution) -> Solution {
    let mut residence = Vec::new();
    let mut queue = Vec::new();
    let mut i = 0;
    for s in stations {
        let mut r = split.residence_s[i].clone();
        let mut qk = split.queue[i];
        i += 1;
        if s.servers > 1 {
            for (a, b) in r.iter_mut().zip(&split.residence_s[i]) {
                *a += b;
            }
            qk += split.queue[i];
            i += 1;
        }
        residence.push(r);
        queue.push(qk);
    }
    Solution {
        population: split.population.clone(),
        throughput: split.throughput.clone(),
        response_s: split.response_s.clone(),
        utilization: stations
            .iter()
            .map(|s| {
                s.demands
                    .iter()
                    .zip(&split.throughput)
                    .map(|(d, x)| d * x)
                    .sum()
            })
            .collect(),
        residence_s: residence,
        queue,
    }
}

/// Exact multi-class MVA at `population` (users per class); `think_s` per
/// class. Cost grows as `Π (N_c + 1)`: meant for a few classes.
pub fn exact_multi(stations: &[Station], think_s: &[f64], population: &[u32]) -> Solution {
    let split = seidmann(stations);
    let classes = population.len();
    let dims: Vec<usize> = population.iter().map(|&n| n as usize + 1).collect();
    let index = |v: &[u32]| -> usize {
        v.iter()
            .zip(&dims)
            .fold(0, |acc, (&n, &d)| acc * d + n as usize)
    };
    let total: usize = dims.iter().product();
    // Queue lengths per station for every population vector, visited in an
    // order where every vector comes after those with one customer fewer.
    let mut queues = vec![vec![0.0; split.len()]; total];
    let mut last = None;
    let mut v = vec![0u32; classes];
    loop {
        if v.iter().any(|&n| n > 0) {
            let mut residence = vec![vec![0.0; classes]; split.len()];
            let mut x = vec![0.0; classes];
            for c in 0..classes {
                if v[c] == 0 {
                    continue;
                }
                let mut less = v.clone();
                less[c] -= 1;
                let q = &queues[index(&less)];
                for (k, s) in split.iter().enumerate() {
                    let d = s.demands[c];
                    residence[k][c] = if s.is_delay() { d } else { d * (1.0 + q[k]) };
                }
                let r: f64 = residence.iter().map(|r| r[c]).sum();
                x[c] = v[c] as f64 / (think_s[c] + r);
            }
            let q: Vec<f64> = residence
                .iter()
                .map(|r| r.iter().zip(&x).map(|(r, x)| r * x).sum())
                .collect();
            queues[index(&v)] = q.clone();
            last = Some(Solution {
                population: v.clone(),
                response_s: (0..classes)
                    .map(|c| residence.iter().map(|r| r[c]).sum())
                    .collect(),
                throughput: x,
                residence_s: residence,
                queue: q,
                utilization: Vec::new(),
            });
        }
        // Next vector in lexicographic order.
        let mut c = classes;
        loop {
            if c == 0 {
                let solved = last.expect("a population of at least one user");
                return unsplit(stations, &solved);
            }
            c -= 1;
            if v[c] < population[c] {
                v[c] += 1;
                for w in v.iter_mut().skip(c + 1) {
                    *w = 0;
                }
                break;
            }
        }
    }
}

/// Schweitzer's approximate multi-class MVA at `population`, iterated until
/// queue lengths move less than `1e-9` of a customer (at most 10,000
/// rounds).
pub fn schweitzer(stations: &[Station], think_s: &[f64], population: &[u32]) -> Solution {
    let split = seidmann(stations);
    let classes = population.len();
    // q[k][c]: class-c customers at station k; start spread evenly.
    let queueing = split.iter().filter(|s| !s.is_delay()).count().max(1) as f64;
    let mut q: Vec<Vec<f64>> = split
        .iter()
        .map(|s| {
            population
                .iter()
                .map(|&n| {
                    if s.is_delay() {
                        0.0
                    } else {
                        n as f64 / queueing
                    }
                })
                .collect()
        })
        .collect();
    let mut residence = vec![vec![0.0; classes]; split.len()];
    let mut x = vec![0.0; classes];
    for _ in 0..10_000 {
        for c in 0..classes {
            let n = population[c] as f64;
            if n == 0.0 {
                x[c] = 0.0;
                continue;
            }
            for (k, s) in split.iter().enumerate() {
                let d = s.demands[c];
                residence[k][c] = if s.is_delay() {
                    d
                } else {
                    // The arrival sees the others: its own class less itself.
                    let seen: f64 = (0..classes)
                        .map(|o| {
                            if o == c {
                                q[k][o] * (n - 1.0) / n
                            } else {
                                q[k][o]
                            }
                        })
                        .sum();
                    d * (1.0 + seen)
                };
            }
            let r: f64 = residence.iter().map(|r| r[c]).sum();
            x[c] = n / (think_s[c] + r);
        }
        let mut moved: f64 = 0.0;
        for k in 0..split.len() {
            for c in 0..classes {
                let next = x[c] * residence[k][c];
                moved = moved.max((next - q[k][c]).abs());
                q[k][c] = next;
            }
        }
        if moved < 1e-9 {
            break;
        }
    }
    let solved = Solution {
        population: population.to_vec(),
        response_s: (0..classes)
            .map(|c| residence.iter().map(|r| r[c]).sum())
            .collect(),
        throughput: x,
        queue: q.iter().map(|q| q.iter().sum()).collect(),
        residence_s: residence,
        utilization: Vec::new(),
    };
    unsplit(stations, &solved)
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
            Station::queue("cpu", 1, vec![2.0]),
            Station::queue("disk a", 1, vec![3.0]),
            Station::queue("disk b", 1, vec![1.0]),
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
            assert!(
                close(p.response_s[0], r, 0.0015),
                "N={n}: R {}",
                p.response_s[0]
            );
            assert!(
                close(p.throughput[0], x, 0.0015),
                "N={n}: X {}",
                p.throughput[0]
            );
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
        let four = [Station::queue("web", 4, vec![0.004])];
        let s = exact(&four, 0.0, 40);
        for n in 1..=4 {
            assert!(close(s[n - 1].response_s[0], 0.004, 1e-12), "N={n}");
        }
        assert!(close(s[39].throughput[0], 1000.0, 1e-6));
        // One server four times as fast would answer 4 users in 4 ms, not 4.
        let fast = exact(&[Station::queue("web", 1, vec![0.001])], 0.0, 4);
        assert!(close(fast[3].response_s[0], 0.004, 1e-12));
        // Machine repairman, 2 servers, D = 1, Z = 1, N = 3, solved as a
        // birth-death chain: j at the station, up-rates 3, 2, 1, down-rates
        // 1, 2, 2, so p = (1, 3, 3, 1.5)·2/17 and X = Σ min(j, 2)·p_j = 24/17.
        let s = exact(&[Station::queue("m", 2, vec![1.0])], 1.0, 3);
        assert!(
            close(s[2].throughput[0], 24.0 / 17.0, 1e-9),
            "{}",
            s[2].throughput[0]
        );
    }

    #[test]
    fn classes_alike_solve_like_one_class() {
        let one = [
            Station::queue("cpu", 1, vec![2.0]),
            Station::queue("disk", 1, vec![3.0]),
        ];
        let two = [
            Station::queue("cpu", 1, vec![2.0, 2.0]),
            Station::queue("disk", 1, vec![3.0, 3.0]),
        ];
        let single = exact(&one, 4.0, 6);
        let multi = exact_multi(&two, &[4.0, 4.0], &[2, 4]);
        let x: f64 = multi.throughput.iter().sum();
        assert!(close(x, single[5].throughput[0], 1e-9));
        assert!(close(multi.response_s[0], single[5].response_s[0], 1e-9));
        assert!(close(multi.utilization[1], single[5].utilization[1], 1e-9));
    }

    /// Two classes, two queues, N = (1, 1), worked by hand with the arrival
    /// theorem: class 1 (D 1, 2; Z 0) alone gives X1 = 1/3, Q = (1/3, 2/3);
    /// class 2 (D 2, 1; Z 0) alone X2 = 1/3, Q = (2/3, 1/3). Together, class
    /// 1 sees class 2's queues: R1 = 1·(1+2/3) + 2·(1+1/3) = 13/3.
    #[test]
    fn two_classes_by_the_arrival_theorem() {
        let stations = [
            Station::queue("a", 1, vec![1.0, 2.0]),
            Station::queue("b", 1, vec![2.0, 1.0]),
        ];
        let s = exact_multi(&stations, &[0.0, 0.0], &[1, 1]);
        assert!(close(s.response_s[0], 13.0 / 3.0, 1e-12));
        assert!(close(s.response_s[1], 13.0 / 3.0, 1e-12));
        assert!(close(s.throughput[0], 3.0 / 13.0, 1e-12));
    }

    #[test]
    fn schweitzer_stays_near_exact() {
        let stations = [
            Station::queue("cpu", 1, vec![0.010, 0.020]),
            Station::queue("db", 2, vec![0.030, 0.005]),
            Station::queue("disk", 1, vec![0.008, 0.012]),
        ];
        let think = [1.0, 0.5];
        for pop in [[5, 5], [20, 10], [60, 40]] {
            let e = exact_multi(&stations, &think, &pop);
            let a = schweitzer(&stations, &think, &pop);
            for c in 0..2 {
                let gap = (a.throughput[c] - e.throughput[c]).abs() / e.throughput[c];
                assert!(gap < 0.05, "{pop:?} class {c}: {gap}");
            }
        }
    }

    #[test]
    fn seidmann_is_near_the_exact_multi_server_answer() {
        let stations = [Station::queue("web", 4, vec![0.004])];
        let exact = exact(&stations, 0.1, 200);
        for n in [10, 60, 100, 140, 200] {
            let e = &exact[n - 1];
            let a = exact_multi(&stations, &[0.1], &[n as u32]);
            let gap = (a.throughput[0] - e.throughput[0]).abs() / e.throughput[0];
            assert!(gap < 0.05, "N={n}: {gap}");
        }
    }
}
