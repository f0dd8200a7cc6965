//! Mean value analysis of closed product-form networks with several user
//! classes (`classes:`): each class has its own population, think time
//! and demand at every station.
//!
//! - `exact_multi`: exact, by the recursion over every population vector
//!   below the one asked (Lazowska et al., ch. 7): cost `Π (N_c + 1)`, so
//!   for a few classes of moderate populations;
//! - `schweitzer`: approximate (Schweitzer's fixed point: a class-`c`
//!   arrival sees `Q_k·(N_c − 1)/N_c` of its own class), for the rest.
//!
//! Multi-server stations use Seidmann's approximation: a `c`-server
//! station of demand `D` becomes a queue of demand `D/c` plus a delay of
//! `D·(c−1)/c`. It is exact at low load and in saturation and
//! underestimates the queueing near the knee (by up to ~10% of the
//! response time for c = 2..8 in Seidmann et al.'s tables). The
//! single-class solver (`capacity::mva::exact`) is exact for them.

/// A station of the network.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Station {
    pub name: String,
    /// Identical servers sharing one queue (cores); 0 makes it a delay
    /// station (no queueing).
    pub servers: u32,
    /// Service demand of one cycle of each class, seconds.
    pub demands: Vec<f64>,
}

impl Station {
    pub(crate) fn queue(name: &str, servers: u32, demands: Vec<f64>) -> Station {
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
pub(crate) struct Solution {
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

/// Population vectors past which the exact recursion is left for
/// Schweitzer's approximation (a curve of 200 points solves each).
const EXACT_LIMIT: f64 = 2e4;

/// Whether `population` is small enough for `exact_multi`.
pub(crate) fn exact_fits(population: &[u32]) -> bool {
    let vectors: f64 = population.iter().map(|&n| n as f64 + 1.0).product();
    vectors <= EXACT_LIMIT
}

/// `exact_multi` when `exact`, else `schweitzer` (one choice for a whole
/// curve, so it has no kink where the solver would change).
pub(crate) fn solve(
    stations: &[Station],
    think_s: &[f64],
    population: &[u32],
    exact: bool,
) -> Solution {
    match exact {
        true => exact_multi(stations, think_s, population),
        false => schweitzer(stations, think_s, population),
    }
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
pub(crate) fn exact_multi(stations: &[Station], think_s: &[f64], population: &[u32]) -> Solution {
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
                // A class that neither thinks nor is served would cycle
                // infinitely fast: its rate is capped, not infinite.
                x[c] = v[c] as f64 / (think_s[c] + r).max(1e-12);
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
pub(crate) fn schweitzer(stations: &[Station], think_s: &[f64], population: &[u32]) -> Solution {
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
            x[c] = n / (think_s[c] + r).max(1e-12);
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
    use crate::capacity::mva;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    /// The single-class exact solver on the same stations, at `users`.
    fn exact(stations: &[Station], think_s: f64, users: u32) -> Vec<mva::Solution> {
        let one: Vec<mva::Station> = stations
            .iter()
            .map(|s| mva::Station::queue(&s.name, s.servers, s.demands[0]))
            .collect();
        mva::exact(&one, think_s, users)
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
        assert!(close(x, single[5].throughput, 1e-9));
        assert!(close(multi.response_s[0], single[5].response_s, 1e-9));
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
            let gap = (a.throughput[0] - e.throughput).abs() / e.throughput;
            assert!(gap < 0.05, "N={n}: {gap}");
        }
    }
}
