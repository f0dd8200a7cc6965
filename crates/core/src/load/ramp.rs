//! A closed workload's users over time: straight lines between the stages'
//! end points, from 0 at the level's start (`users: [{to: 500, over: 2m},
//! {hold: 5m}, {to: 0, over: 30s}]`); the last count holds after the end.
//! Users are whole: at `t` the plan is ⌊users_at(t)⌋ of them, and
//! `next_change` says when that count moves next, so the engine sleeps
//! exactly until then.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UserRamp {
    /// (seconds from the start, users), the first at (0, 0), in time order.
    points: Vec<(f64, f64)>,
}

impl UserRamp {
    /// From stages of (users to reach, over how long); a hold is a stage
    /// to the count already reached.
    pub(crate) fn new(stages: &[(u32, Duration)]) -> UserRamp {
        let mut points = vec![(0.0, 0.0)];
        let mut t = 0.0;
        for &(to, over) in stages {
            t += over.as_secs_f64();
            points.push((t, f64::from(to)));
        }
        UserRamp { points }
    }

    /// How long the stages last together.
    pub(crate) fn total(&self) -> Duration {
        Duration::from_secs_f64(self.points.last().map_or(0.0, |p| p.0))
    }

    /// The most users at any time.
    pub(crate) fn max(&self) -> u32 {
        self.points.iter().map(|p| p.1 as u32).max().unwrap_or(0)
    }

    /// Planned users at `t` seconds, a real number (the engine runs its
    /// floor).
    pub(crate) fn users_at(&self, t: f64) -> f64 {
        let last = *self.points.last().expect("a ramp starts at (0, 0)");
        if t >= last.0 {
            return last.1;
        }
        let i = self.points.iter().position(|p| p.0 > t).unwrap_or(0).max(1);
        let (a, b) = (self.points[i - 1], self.points[i]);
        if b.0 <= a.0 {
            return b.1;
        }
        a.1 + (b.1 - a.1) * (t - a.0) / (b.0 - a.0)
    }

    /// The first time after `t` at which ⌊users_at⌋ differs from its value
    /// at `t`; `None` once the plan no longer changes.
    pub(crate) fn next_change(&self, t: f64) -> Option<f64> {
        let now = self.users_at(t).floor();
        for w in self.points.windows(2) {
            let (a, b) = (w[0], w[1]);
            if b.0 <= t || b.0 <= a.0 {
                // Past, or a step (a zero-length stage): its end is a change
                // only if the count differs there.
                if b.0 > t && b.1.floor() != now {
                    return Some(b.0);
                }
                continue;
            }
            let from = t.max(a.0);
            let slope = (b.1 - a.1) / (b.0 - a.0);
            // The level the count crosses next, going up or down.
            let target = if slope > 0.0 {
                now + 1.0
            } else if slope < 0.0 {
                now
            } else {
                if b.1.floor() != now {
                    return Some(from);
                }
                continue;
            };
            let at = a.0 + (target - a.1) / slope;
            // Going down, the floor moves only once the count is below
            // `target`, which the segment's end must pass.
            let reached = if slope > 0.0 { at <= b.0 } else { b.1 < target };
            if reached && at >= from {
                // Just past the crossing, so the floor has moved there.
                let at = if at > t { at } else { t };
                return Some(at + 1e-9);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_ramp_a_hold_and_a_ramp_down() {
        let r = UserRamp::new(&[(100, secs(10)), (100, secs(5)), (0, secs(5))]);
        assert_eq!(r.total(), secs(20));
        assert_eq!(r.max(), 100);
        assert_eq!(r.users_at(0.0), 0.0);
        assert!((r.users_at(2.5) - 25.0).abs() < 1e-9);
        assert_eq!(r.users_at(12.0), 100.0);
        assert!((r.users_at(17.5) - 50.0).abs() < 1e-9);
        assert_eq!(r.users_at(99.0), 0.0);
    }

    #[test]
    fn next_change_steps_through_every_whole_user() {
        let r = UserRamp::new(&[(10, secs(10)), (10, secs(5)), (0, secs(2))]);
        // Up: one user a second.
        let mut t = 0.0;
        let mut counts = vec![r.users_at(t).floor() as u32];
        while let Some(next) = r.next_change(t) {
            assert!(next > t, "{next} after {t}");
            t = next;
            counts.push(r.users_at(t).floor() as u32);
        }
        let up: Vec<u32> = (0..=10).collect();
        assert_eq!(&counts[..11], &up[..]);
        // Down from 10 to 0 over 2 s: every whole count, then no change.
        let down: Vec<u32> = (0..10).rev().collect();
        assert_eq!(&counts[11..], &down[..], "{counts:?}");
        // The last: below one user, a fifth of a second before the end.
        assert!((t - 16.8).abs() < 1e-6, "{t}");
    }

    #[test]
    fn a_hold_wakes_nobody_until_its_end() {
        let r = UserRamp::new(&[(5, secs(5)), (5, secs(60)), (8, secs(3))]);
        let next = r.next_change(6.0).unwrap();
        assert!((next - 66.0).abs() < 1e-6, "{next}");
    }
}
