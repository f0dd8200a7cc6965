//! When a level's requests completed, second by second, so that what an
//! agent measured between two readings is divided by the requests
//! completed between the same two instants (not by the whole level's
//! throughput, which differs when the agent missed part of the level).

use std::time::Instant;

use crate::measure::{LevelInfo, Tick, TickSink};

/// One level's ticks: `(start, end, requests completed)`; kept only when
/// some agent's readings will be divided by them (a run of hours without
/// agents holds none).
pub(crate) struct Completions(Vec<(Instant, Instant, u64)>, bool);

impl Completions {
    pub(crate) fn new(keep: bool) -> Completions {
        Completions(Vec::new(), keep)
    }

    /// Requests completed between `from` and `to`, each tick's spread
    /// evenly over its interval.
    pub(crate) fn between(&self, from: Instant, to: Instant) -> f64 {
        self.0
            .iter()
            .map(|&(start, end, requests)| {
                let overlap = to.min(end).saturating_duration_since(from.max(start));
                let length = end - start;
                if length.is_zero() {
                    0.0
                } else {
                    requests as f64 * overlap.as_secs_f64() / length.as_secs_f64()
                }
            })
            .sum()
    }
}

impl TickSink for Completions {
    fn on_tick(&mut self, _level: &LevelInfo, tick: &Tick) {
        if !self.1 {
            return;
        }
        let requests = tick.stats.per_request.iter().map(|r| r.requests).sum();
        self.0.push((tick.end - tick.length, tick.end, requests));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn requests_between_two_instants_are_counted_pro_rata() {
        let t0 = Instant::now();
        let s = |x: f64| t0 + Duration::from_secs_f64(x);
        let c = Completions(
            vec![
                (s(0.0), s(1.0), 100),
                (s(1.0), s(2.0), 300),
                (s(2.0), s(2.5), 50),
            ],
            true,
        );
        assert_eq!(c.between(s(0.0), s(2.5)), 450.0);
        assert!((c.between(s(0.5), s(1.5)) - 200.0).abs() < 1e-6);
        assert!((c.between(s(2.25), s(9.0)) - 25.0).abs() < 1e-6);
        assert_eq!(c.between(s(3.0), s(4.0)), 0.0);
    }
}
