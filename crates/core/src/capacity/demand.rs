//! CPU service demand per request and its convergence (AutoPerf section
//! 2.1.1), for the set of server processes of one level.
//!
//! Each profiler reading gives, per process `p`, the cumulative CPU seconds
//! `S_p(t)` since the level's profiling started, together with the requests
//! completed `n(t)` over the same span. The estimate is
//! `τ_p(t) = S_p(t) / n(t)` seconds per request.
//!
//! **The sawtooth.** `S_p` only moves in whole clock ticks (10 ms in
//! `/proc/<pid>/stat`; the paper's `ps` had 1 s), so `τ_p` decays while `S_p`
//! stands still and jumps when a tick lands. Checking consecutive estimates
//! would declare convergence just before a jump. Following the paper:
//!
//! 1. *Global check* (eq. 1, relaxed): between two readings `S_p` can grow by
//!    at most `ΔS` CPU-seconds, so a jump of the estimate is bounded by
//!    `Δτ/τ < ΔS / S_p(t)`. With `Δ(L) = L/(γ + R(L))` requests per second,
//!    each of which could at most keep one core busy, and `N` cores on the
//!    host, the CPU time per second of wall time is at most `min(Δ(L), N)`
//!    core-seconds per second; over a reading interval of `Δt` seconds,
//!    `ΔS = min(Δ(L), N) · Δt` CPU-seconds (the paper assumes `Δt = 1 s`).
//!    Global convergence holds once `ΔS · 100 / S_p(t) < ε` (ε in percent),
//!    and, since `S_p` only grows, it stays true; it is latched.
//! 2. *Local check*: once global convergence holds, the last `k` estimates
//!    (all taken after it) must satisfy `(max − mean)/mean · 100 < ε_local`.
//!
//! **Using /proc's resolution.** The paper's bound is what `ps` needed: with
//! 1 s granularity, up to a whole reading interval of work can be missing
//! from `S_p` and land at once. /proc counts in ticks of `g` = 10 ms, so the
//! work not yet visible in `S_p` is less than one tick, and no jump of the
//! estimate can exceed `g / S_p(t)` either. The jump bound is therefore
//! `min(ΔS, g)`: the global check holds once `S_p > 100·g/ε` (0.2 s of CPU at
//! ε = 5%) instead of `100·ΔS/ε` (40 s on a busy 2-core host).
//!
//! This stays honest about the tick: the global check bounds *any* jump of the
//! estimate, a tick's included, by ε, so a window caught just before a jump
//! is still within ε of the value after it; the local check then sees the
//! residual sawtooth (at most one tick over `S_p`, below ε once the global
//! check holds) plus any real drift, such as a warm-up that is still ending.
//!
//! The readings count from the start of *profiling*, which the controller
//! begins once the level is at steady state (2.1): otherwise the warm-up's CPU
//! stays in `S_p(t)/n(t)` for good.
//!
//! **The timeout** (eq. 2): after `p_max` readings, if every process still
//! reads zero, the load is too low to measure: the demand is taken as
//! `τ = min(S_low / n, R(L))` and `load_too_low` is set so the search moves
//! up. If only some stayed near zero — below what the global check needs, so
//! they can never converge at this load — those are *ignored*: flagged, not
//! waited for, their tiny `S_p/n` still reported.

use std::collections::VecDeque;

use crate::scenario::CapacitySettings;

/// Tunables of the demand convergence check.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DemandConfig {
    /// ε of the global check, percent (`CapacitySettings::demand_epsilon`).
    pub epsilon_pct: f64,
    /// Threshold of the local check, percent. Default: the same ε.
    pub local_epsilon_pct: f64,
    /// Estimates in the local moving window (`k`). Default 5.
    pub local_window: usize,
    /// Readings after which zero readers are dealt with (`p_max`).
    pub p_max: u32,
    /// The CPU time assumed when every process reads zero (`S_low`), seconds.
    pub s_low_s: f64,
    /// Resolution of the CPU counters, seconds (one clock tick of /proc).
    pub granularity_s: f64,
}

impl DemandConfig {
    pub(crate) fn from_settings(s: &CapacitySettings) -> Self {
        DemandConfig {
            epsilon_pct: s.demand_epsilon,
            local_epsilon_pct: s.demand_epsilon,
            local_window: 5,
            p_max: s.p_max,
            s_low_s: s.s_low.as_secs_f64(),
            granularity_s: CLOCK_TICK_S,
        }
    }
}

/// /proc's CPU time resolution on Linux (`USER_HZ` = 100).
pub(crate) const CLOCK_TICK_S: f64 = 0.01;

impl Default for DemandConfig {
    fn default() -> Self {
        Self::from_settings(&CapacitySettings::default())
    }
}

/// Expected throughput of a closed system, `Δ(L) = L / (γ + R(L))` (2.1.1).
pub(crate) fn expected_throughput_rps(users: u32, think_s: f64, response_time_s: f64) -> f64 {
    let cycle = think_s + response_time_s;
    if cycle > 0.0 {
        users as f64 / cycle
    } else {
        f64::INFINITY
    }
}

/// One profiler reading, for every process of the tracker, in its order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DemandReading {
    /// Seconds since profiling of this level started.
    pub elapsed_s: f64,
    /// Requests completed since then, `n(t)`.
    pub completed: u64,
    /// Cumulative CPU seconds per process since then, `S_p(t)`.
    pub cpu_s: Vec<f64>,
    /// `Δ(L)`, see [`expected_throughput_rps`].
    pub expected_rps: f64,
    /// Running mean response time `R(L)`, seconds (for eq. 2).
    pub response_time_s: f64,
}

/// Where one process stands.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProcessDemand {
    /// Seconds of CPU per request; `None` before any request completed.
    pub demand_s: Option<f64>,
    /// The global check (eq. 1 with `ΔS`) holds.
    pub global: bool,
    /// Global and local checks both held (latched).
    pub converged: bool,
    /// Still zero after `p_max` readings while others moved: not waited for.
    pub ignored: bool,
}

/// Where the whole set stands after the latest reading.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DemandStatus {
    pub processes: Vec<ProcessDemand>,
    /// Every process not ignored has converged.
    pub all_converged: bool,
    /// Every process read zero after `p_max` readings; demands are eq. 2's.
    pub load_too_low: bool,
    pub readings: u32,
}

impl DemandStatus {
    /// The level may stop profiling.
    pub(crate) fn finished(&self) -> bool {
        self.all_converged || self.load_too_low
    }
}

#[derive(Debug, Clone)]
struct Process {
    cores: u32,
    cpu_s: f64,
    recent: VecDeque<f64>,
    state: ProcessDemand,
}

/// Demand convergence for a fixed set of processes over one level.
#[derive(Debug, Clone)]
pub(crate) struct DemandTracker {
    config: DemandConfig,
    processes: Vec<Process>,
    last_elapsed_s: Option<f64>,
    readings: u32,
    load_too_low: bool,
}

impl DemandTracker {
    /// `cores[p]` is the number of cores of process `p`'s host.
    pub(crate) fn new(config: DemandConfig, cores: &[u32]) -> Self {
        let processes = cores
            .iter()
            .map(|&c| Process {
                cores: c.max(1),
                cpu_s: 0.0,
                recent: VecDeque::new(),
                state: ProcessDemand {
                    demand_s: None,
                    global: false,
                    converged: false,
                    ignored: false,
                },
            })
            .collect();
        DemandTracker {
            config,
            processes,
            last_elapsed_s: None,
            readings: 0,
            load_too_low: false,
        }
    }

    /// Takes one reading. A process missing from `cpu_s` keeps its last value.
    pub(crate) fn push(&mut self, r: &DemandReading) -> DemandStatus {
        self.readings += 1;
        let interval = match self.last_elapsed_s {
            Some(prev) if r.elapsed_s > prev => r.elapsed_s - prev,
            None if r.elapsed_s > 0.0 => r.elapsed_s,
            _ => 1.0,
        };
        self.last_elapsed_s = Some(r.elapsed_s);
        let k = self.config.local_window.max(1);
        for (i, p) in self.processes.iter_mut().enumerate() {
            if let Some(&s) = r.cpu_s.get(i) {
                // Cumulative counters never go back; a lower value is noise.
                p.cpu_s = p.cpu_s.max(s);
            }
            p.state.demand_s = (r.completed > 0).then(|| p.cpu_s / r.completed as f64);
            if !p.state.global {
                let jump =
                    jump_bound_s(r.expected_rps, p.cores, interval).min(self.config.granularity_s);
                p.state.global = global_check(jump, p.cpu_s, self.config.epsilon_pct);
            }
            if p.state.global && !p.state.converged {
                if let Some(tau) = p.state.demand_s {
                    p.recent.push_back(tau);
                    while p.recent.len() > k {
                        p.recent.pop_front();
                    }
                    p.state.converged = p.recent.len() == k
                        && local_check(p.recent.make_contiguous(), self.config.local_epsilon_pct);
                }
            }
        }
        if self.readings >= self.config.p_max {
            self.timeout(r);
        }
        self.status()
    }

    /// The `p_max` rule: all near zero → eq. 2 and `load_too_low`; some
    /// near zero → ignore them.
    fn timeout(&mut self, r: &DemandReading) {
        let near_zero = |p: &Process| self.near_zero(p.cpu_s);
        let all_near_zero = self.processes.iter().all(near_zero);
        if all_near_zero && !self.processes.is_empty() {
            self.load_too_low = true;
            // Eq. 2 for a process that read zero; one that read a few ticks
            // keeps its measured S/n, a better guess than S_low/n.
            let tau = s_low_demand_s(self.config.s_low_s, r.completed, r.response_time_s);
            for p in &mut self.processes {
                if p.cpu_s <= 0.0 || r.completed == 0 {
                    p.state.demand_s = Some(tau);
                }
            }
        } else {
            let flags: Vec<bool> = self.processes.iter().map(near_zero).collect();
            for (p, idle) in self.processes.iter_mut().zip(flags) {
                if idle && !p.state.converged {
                    p.state.ignored = true;
                }
            }
        }
    }

    /// Zero, or (with a known counter resolution) too little CPU for the
    /// global check ever to hold at this load: `S_p < 100·g/ε`.
    fn near_zero(&self, cpu_s: f64) -> bool {
        let g = self.config.granularity_s;
        cpu_s <= 0.0 || (g.is_finite() && cpu_s * self.config.epsilon_pct < 100.0 * g)
    }

    pub(crate) fn status(&self) -> DemandStatus {
        DemandStatus {
            processes: self.processes.iter().map(|p| p.state.clone()).collect(),
            all_converged: self
                .processes
                .iter()
                .all(|p| p.state.ignored || p.state.converged),
            load_too_low: self.load_too_low,
            readings: self.readings,
        }
    }
}

/// `ΔS`: the most CPU-seconds a process can add between two readings `Δt`
/// apart: `min(Δ(L), N) · Δt` (2.1.1; `Δ(L)` in requests per second, each
/// keeping at most one core busy; `N` cores).
pub(crate) fn jump_bound_s(expected_rps: f64, cores: u32, interval_s: f64) -> f64 {
    expected_rps.max(0.0).min(cores as f64) * interval_s
}

/// The global check, `ΔS · 100 / S_p(t) < ε` (eq. 1 with `N` replaced by `ΔS`).
pub(crate) fn global_check(jump_bound_s: f64, cpu_s: f64, epsilon_pct: f64) -> bool {
    cpu_s > 0.0 && jump_bound_s * 100.0 / cpu_s < epsilon_pct
}

/// The local check over a window of estimates: `(max − mean)/mean · 100 < ε`.
pub(crate) fn local_check(window: &[f64], epsilon_pct: f64) -> bool {
    if window.is_empty() {
        return false;
    }
    let mean = window.iter().sum::<f64>() / window.len() as f64;
    let max = window.iter().copied().fold(f64::MIN, f64::max);
    mean > 0.0 && (max - mean) * 100.0 / mean < epsilon_pct
}

/// Eq. 2: `τ = min(S_low / n, R(L))`, the bottleneck demand assumed at a load
/// too low to register any CPU time.
pub(crate) fn s_low_demand_s(s_low_s: f64, completed: u64, response_time_s: f64) -> f64 {
    let per_request = if completed > 0 {
        s_low_s / completed as f64
    } else {
        f64::INFINITY
    };
    per_request.min(response_time_s.max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> DemandConfig {
        DemandConfig {
            epsilon_pct: 5.0,
            local_epsilon_pct: 5.0,
            local_window: 5,
            p_max: 30,
            s_low_s: 0.005,
            // The paper's setting: no finer resolution than a reading's ΔS.
            granularity_s: f64::INFINITY,
        }
    }

    /// A 10 ms tick: `/proc` truncates the CPU time to whole ticks.
    fn ticks(cpu_s: f64) -> f64 {
        (cpu_s / 0.01).floor() * 0.01
    }

    #[test]
    fn sawtooth_of_10ms_ticks_converges_after_the_global_check() {
        // True demand 2 ms at about 200 req/s on one core: 0.4 CPU-s/s. The
        // count and the CPU per request vary from second to second (the mix
        // of a session), and /proc truncates to 10 ms: a sawtooth.
        let mut t = DemandTracker::new(config(), &[1]);
        let (mut n, mut cpu) = (0u64, 0.0f64);
        let counts = [180u64, 220, 195, 205, 190, 210];
        let per_request = [0.0016, 0.0024, 0.0021, 0.0019, 0.0018, 0.0022];
        let mut converged_at = None;
        let mut estimates: Vec<f64> = Vec::new();
        let mut naive_at = None;
        for sec in 1..=200u32 {
            let i = sec as usize % counts.len();
            n += counts[i];
            cpu += counts[i] as f64 * per_request[i];
            let st = t.push(&DemandReading {
                elapsed_s: sec as f64,
                completed: n,
                cpu_s: vec![ticks(cpu)],
                expected_rps: 200.0,
                response_time_s: 0.003,
            });
            let tau = st.processes[0].demand_s.unwrap();
            // What a check of consecutive estimates alone would conclude.
            if let Some(&prev) = estimates.last() {
                if naive_at.is_none() && ((tau - prev) / prev).abs() < 0.05 {
                    naive_at = Some(sec);
                }
            }
            estimates.push(tau);
            if st.all_converged {
                converged_at = Some((sec, ticks(cpu), st.processes[0].demand_s.unwrap()));
                break;
            }
        }
        let (sec, s, tau) = converged_at.expect("converges");
        // ΔS = min(200, 1) · 1 s = 1 CPU-s, so the global check needs S > 20 s.
        assert!(s > 20.0, "converged with S = {s} at {sec}s");
        assert!((tau - 0.002).abs() < 0.0002, "τ = {tau}");
        // The sawtooth is real: the estimate did go down and up again.
        let ups = estimates.windows(2).filter(|w| w[1] > w[0]).count();
        let downs = estimates.windows(2).filter(|w| w[1] < w[0]).count();
        assert!(ups > 0 && downs > 0);
        assert!(naive_at.unwrap() < 10, "a naive check stops far too early");
    }

    #[test]
    fn with_procs_10ms_resolution_the_global_check_needs_far_less_cpu() {
        // The same 2 ms at 200 req/s, now with the tick as the jump bound:
        // S_p > 100·0.01/5 = 0.2 s instead of 20 s.
        let fine = DemandConfig {
            granularity_s: CLOCK_TICK_S,
            ..config()
        };
        let mut t = DemandTracker::new(fine, &[2]);
        let (mut n, mut cpu) = (0u64, 0.0f64);
        let counts = [180u64, 220, 195, 205, 190, 210];
        let per_request = [0.0016, 0.0024, 0.0021, 0.0019, 0.0018, 0.0022];
        let mut done = None;
        for sec in 1..=60u32 {
            let i = sec as usize % counts.len();
            n += counts[i];
            cpu += counts[i] as f64 * per_request[i];
            let st = t.push(&DemandReading {
                elapsed_s: sec as f64,
                completed: n,
                cpu_s: vec![ticks(cpu)],
                expected_rps: 200.0,
                response_time_s: 0.003,
            });
            if st.all_converged {
                done = Some((sec, st.processes[0].demand_s.unwrap()));
                break;
            }
        }
        let (sec, tau) = done.expect("converges");
        assert!(sec <= 15, "took {sec} readings");
        assert!((tau - 0.002).abs() / 0.002 < 0.10, "τ = {tau}");
    }

    #[test]
    fn with_procs_resolution_a_nearly_idle_process_is_ignored_at_p_max() {
        let fine = DemandConfig {
            granularity_s: CLOCK_TICK_S,
            p_max: 10,
            ..config()
        };
        let mut t = DemandTracker::new(fine, &[2, 2]);
        let mut last = None;
        for sec in 1..=10u32 {
            let n = 300 * sec as u64;
            last = Some(t.push(&DemandReading {
                elapsed_s: sec as f64,
                completed: n,
                // 2 ms per request, and one stray tick on the idle process.
                cpu_s: vec![ticks(n as f64 * 0.002), 0.01],
                expected_rps: 300.0,
                response_time_s: 0.003,
            }));
        }
        let st = last.unwrap();
        assert!(st.processes[1].ignored, "{st:?}");
        assert!(st.processes[0].converged && st.all_converged);
    }

    #[test]
    fn a_drifting_estimate_waits_for_the_local_check() {
        // Requests cost 4 ms at first and settle to 2 ms (caches warming):
        // 200 req/s on one core. The global check holds once S > 20 s; the
        // cumulative estimate still drifts ~1%/s then, so a strict local
        // threshold of 1% holds convergence back until the drift slows.
        // (Hence profiling starts after the steady-state verdict, 2.1: the
        // warm-up stays in S_p(t)/n(t) otherwise, 2.7 ms here.)
        let strict = DemandConfig {
            local_epsilon_pct: 1.0,
            ..config()
        };
        let mut t = DemandTracker::new(strict, &[1]);
        let (mut n, mut cpu) = (0u64, 0.0f64);
        let (mut global_at, mut converged_at) = (None, None);
        for sec in 1..=300u32 {
            n += 200;
            cpu += 200.0 * 0.002 * (1.0 + 0.95f64.powi(sec as i32));
            let st = t.push(&DemandReading {
                elapsed_s: sec as f64,
                completed: n,
                cpu_s: vec![ticks(cpu)],
                expected_rps: 200.0,
                response_time_s: 0.005,
            });
            if st.processes[0].global && global_at.is_none() {
                global_at = Some(sec);
            }
            if st.all_converged {
                converged_at = Some(sec);
                break;
            }
        }
        let (g, c) = (global_at.unwrap(), converged_at.unwrap());
        assert!((30..=40).contains(&g), "global at {g}");
        // Filling the window alone takes until g + 4.
        assert!(c >= g + 8, "converged at {c}, global at {g}");
    }

    #[test]
    fn all_zero_after_p_max_means_load_too_low_with_eq_2() {
        let mut t = DemandTracker::new(config(), &[2, 4]);
        let mut last = None;
        for sec in 1..=30u32 {
            let st = t.push(&DemandReading {
                elapsed_s: sec as f64,
                completed: 2 * sec as u64,
                cpu_s: vec![0.0, 0.0],
                expected_rps: 2.0,
                response_time_s: 0.001,
            });
            if sec < 30 {
                assert!(!st.load_too_low && !st.finished());
            }
            last = Some(st);
        }
        let st = last.unwrap();
        assert!(st.load_too_low && st.finished());
        // min(5 ms / 60, 1 ms) = 83 µs.
        let tau = st.processes[0].demand_s.unwrap();
        assert!((tau - 0.005 / 60.0).abs() < 1e-12);
        assert_eq!(s_low_demand_s(0.005, 2, 0.001), 0.001, "R(L) when lower");
        assert_eq!(s_low_demand_s(0.005, 0, 0.001), 0.001);
    }

    #[test]
    fn a_process_still_at_zero_is_ignored_and_not_waited_for() {
        let mut t = DemandTracker::new(config(), &[1, 1]);
        let mut n = 0;
        let mut st = None;
        for sec in 1..=200u32 {
            n += 100;
            let s = t.push(&DemandReading {
                elapsed_s: sec as f64,
                completed: n,
                cpu_s: vec![ticks(n as f64 * 0.003), 0.0],
                expected_rps: 100.0,
                response_time_s: 0.004,
            });
            if sec < 30 {
                assert!(!s.processes[1].ignored);
            }
            if s.all_converged {
                st = Some((sec, s));
                break;
            }
        }
        let (sec, st) = st.expect("converges without the idle process");
        assert!(sec >= 30);
        assert!(!st.load_too_low);
        assert!(st.processes[1].ignored && !st.processes[1].converged);
        assert!(st.processes[0].converged && !st.processes[0].ignored);
        assert!((st.processes[0].demand_s.unwrap() - 0.003).abs() < 0.0003);
    }

    #[test]
    fn the_formulas() {
        assert_eq!(expected_throughput_rps(10, 1.0, 0.25), 8.0);
        // Low load: ΔS is Δ(L), not N.
        assert_eq!(jump_bound_s(0.5, 8, 1.0), 0.5);
        assert_eq!(jump_bound_s(500.0, 8, 2.0), 16.0);
        assert!(global_check(1.0, 21.0, 5.0));
        assert!(!global_check(1.0, 20.0, 5.0));
        assert!(!global_check(1.0, 0.0, 5.0));
        assert!(local_check(&[1.0, 1.02, 0.99, 1.01, 1.0], 5.0));
        assert!(!local_check(&[1.0, 1.0, 1.0, 1.0, 1.3], 5.0));
        assert!(!local_check(&[], 5.0));
    }
}
