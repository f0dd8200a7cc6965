//! Why the generator, not the system, may have limited an open level:
//! arrivals sent late, a CPU quota holding it back, its CPU spent — and
//! which failed SLOs each of those can explain.

use crate::capacity::client::LATENESS_FLOOR_S;
use crate::record::{LevelRecord, ThresholdResult, Unit};

/// Generator CPU (a fraction of its cores) past which a failing level
/// counts as the generator's limit.
const GENERATOR_CPU_LIMIT: f64 = 0.95;

/// The share of a level's window a quota must have held the generator
/// back for to count, when it did so in fewer than a tenth of the periods:
/// a p99 is the slowest hundredth of the requests.
const THROTTLED_SHARE: f64 = 0.01;

/// Why the generator, not the system, may have limited a level.
pub(crate) enum GeneratorLimit {
    /// Arrivals left the scheduler later than scheduling noise explains
    /// (the pacer runs before any connection is asked for, so a slow
    /// server cannot make it late). Arrivals that waited for an in-flight
    /// slot are not evidence: the slots fill when sessions do not finish,
    /// which is the server's doing.
    Late { p99_ms: f64, max_ms: f64 },
    /// Its CPU quota held it back: until the next period began, responses
    /// that had arrived stayed unread and arrivals due stayed unsent, so
    /// latencies count time the generator was not allowed to run — which
    /// its arrival lateness alone does not show (a response read late is
    /// not an arrival sent late).
    Throttled {
        quota_cores: f64,
        periods: u64,
        throttled_periods: u64,
        period_ms: f64,
        /// How long it was held in the window, at most (its throttled
        /// periods, each held at most a period; cgroup v1's throttled time
        /// adds up each CPU's, so the smaller of the two).
        held_ms: f64,
        late_max_ms: f64,
    },
    /// Its CPU (or its quota of CPU) was all but spent.
    Cpu { used: f64, cores: f64 },
}

impl GeneratorLimit {
    pub(crate) fn why(&self) -> String {
        match self {
            GeneratorLimit::Late { p99_ms, .. } => {
                format!("arrivals left the generator late (p99 {p99_ms:.1} ms past their time)")
            }
            GeneratorLimit::Throttled {
                quota_cores,
                periods,
                throttled_periods,
                ..
            } => format!(
                "the generator's CPU quota ({quota_cores} cores) held it back in {throttled_periods} of {periods} periods"
            ),
            GeneratorLimit::Cpu { used, cores } => {
                format!("the generator used {used:.2} of its {cores} cores")
            }
        }
    }

    /// Whether this limit could have failed `slo`. A spent CPU could fail
    /// anything. Lateness is bounded: every latency counts from the
    /// arrival's intended start, so late arrivals add at most the largest
    /// lateness to each; and arrivals late by that much can take at most
    /// that share of the level from the delivered rate. A throttled
    /// generator adds to that at most a period's wait for its quota, on
    /// the response's side. A system whose p99 stands seconds past its
    /// SLO, or that delivered half the rate, failed on its own account
    /// even while a shared machine made a few arrivals late by tens of
    /// milliseconds: that level is the system's failure and its capacity,
    /// not the generator's limit.
    pub(crate) fn explains(
        &self,
        slo: &ThresholdResult,
        rate: f64,
        delivered: f64,
        secs: f64,
    ) -> bool {
        // What it can add to a latency, and the time whose arrivals it
        // can have taken from the delivered rate.
        let (added_ms, lost_ms) = match *self {
            GeneratorLimit::Cpu { .. } => return true,
            GeneratorLimit::Late { max_ms, .. } => (max_ms, max_ms),
            GeneratorLimit::Throttled {
                period_ms,
                held_ms,
                late_max_ms,
                ..
            } => (late_max_ms + period_ms, late_max_ms + held_ms),
        };
        let Some(actual) = slo.actual else {
            return true;
        };
        // A late or held-back generator only lowers what the servers
        // spend, and what the consumers have to catch up on.
        if slo.of_tier() || slo.of_consumer_group() {
            return false;
        }
        match slo.unit {
            // It only adds latency: it can explain a latency above an
            // upper bound, never one below a lower bound.
            Unit::Ms => actual > slo.bound && actual - added_ms <= slo.bound,
            Unit::Fraction if slo.source.starts_with("achieved") => {
                let lost = rate * (lost_ms / 1e3) / secs.max(1e-9);
                rate > 0.0 && (delivered + lost) / rate >= slo.bound
            }
            // Errors and throughput thresholds: nothing bounds what it
            // does to them; the generator is not cleared.
            _ => true,
        }
    }
}

/// Why the generator may have limited a level, if it may have: its CPU
/// (its quota's, under one) all but spent; its quota holding it back at
/// times; arrivals sent late.
pub(crate) fn generator_bound(level: &LevelRecord) -> Option<GeneratorLimit> {
    let quota = level.client.cpu_quota.as_ref();
    let cores = quota.map_or(level.client.cores.max(1) as f64, |q| {
        q.cores.min(level.client.cores.max(1) as f64)
    });
    if level.client.cpu_util_cores >= GENERATOR_CPU_LIMIT * cores {
        return Some(GeneratorLimit::Cpu {
            used: level.client.cpu_util_cores,
            cores,
        });
    }
    let late = level.client.arrival_lateness_ms.as_ref();
    let late_max_ms = late.map_or(0.0, |l| l.max);
    let window_ms = level.duration_s * 1e3;
    // Held back long enough to matter: a tenth of the periods, or a
    // hundredth of the window (a p99's share of the requests).
    let material = |periods: u64, throttled: u64, held_ms: f64| {
        throttled > 0
            && (crate::measure::cgroup::holds_back(periods, throttled)
                || held_ms >= THROTTLED_SHARE * window_ms)
    };
    let here = quota.map(|q| {
        let held_ms = q.throttled_ms.min(q.throttled_periods as f64 * q.period_ms);
        GeneratorLimit::Throttled {
            quota_cores: q.cores,
            periods: q.periods,
            throttled_periods: q.throttled_periods,
            period_ms: q.period_ms,
            held_ms,
            late_max_ms,
        }
    });
    let workers = level.workers.iter().map(|w| {
        let period_ms = w.quota_period_ms.unwrap_or(0.0);
        let throttled = w.quota_throttled_periods.unwrap_or(0);
        GeneratorLimit::Throttled {
            quota_cores: w.cpu,
            periods: w.quota_periods.unwrap_or(0),
            throttled_periods: throttled,
            period_ms,
            held_ms: throttled as f64 * period_ms,
            late_max_ms,
        }
    });
    let throttled = here.into_iter().chain(workers).find(|limit| match *limit {
        GeneratorLimit::Throttled {
            periods,
            throttled_periods,
            held_ms,
            ..
        } => material(periods, throttled_periods, held_ms),
        _ => false,
    });
    if throttled.is_some() {
        return throttled;
    }
    let late = late?;
    (late.p99 > LATENESS_FLOOR_S * 1e3).then_some(GeneratorLimit::Late {
        p99_ms: late.p99,
        max_ms: late.max,
    })
}
