//! The overload state machine (AutoPerf section 2.1.2, "Determining the
//! maximum load level — non CPU intensive application").
//!
//! When the bottleneck is not a CPU, Kleinrock's `N*` from CPU demands
//! overestimates capacity and the search runs levels in the overloaded,
//! jagged part of the curve. The machine watches the *power* of the system,
//! `P(L) = Λ(L)/R(L)` (Kleinrock): low at low load (little throughput), low
//! past saturation (long response times), highest near the knee. It tracks
//! the best power `P_max` at `L_Pmax` and the best throughput `X_max` at
//! `L_Xmax`. A level `L` with
//!
//! ```text
//!   P(L) < P_max  and  L > L_Pmax   and   X(L) < X_max  and  L > L_Xmax
//! ```
//!
//! is more loaded than the best levels yet worse on both counts: one state
//! up. Any other level sends the machine back to state 0. `K_ovld`
//! consecutive overloaded levels (in the order they were run) confirm
//! overload. The conditions are checked against the maxima *before* the
//! level updates them.

/// The best value of a metric so far and the level where it was reached.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Best {
    value: f64,
    users: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OverloadDetector {
    k_ovld: u32,
    power: Option<Best>,
    throughput: Option<Best>,
    state: u32,
}

impl OverloadDetector {
    pub(crate) fn new(k_ovld: u32) -> Self {
        OverloadDetector {
            k_ovld: k_ovld.max(1),
            power: None,
            throughput: None,
            state: 0,
        }
    }

    /// Takes the next level run; returns true once overload is confirmed
    /// (state `K_ovld`).
    pub(crate) fn observe(
        &mut self,
        users: u32,
        throughput_rps: f64,
        response_time_s: f64,
    ) -> bool {
        let p = power(throughput_rps, response_time_s);
        let overloaded = match (self.power, self.throughput) {
            (Some(bp), Some(bx)) => {
                p < bp.value && users > bp.users && throughput_rps < bx.value && users > bx.users
            }
            _ => false,
        };
        self.state = if overloaded { self.state + 1 } else { 0 };
        if self.power.is_none_or(|b| p > b.value) {
            self.power = Some(Best { value: p, users });
        }
        if self.throughput.is_none_or(|b| throughput_rps > b.value) {
            self.throughput = Some(Best {
                value: throughput_rps,
                users,
            });
        }
        self.confirmed()
    }

    /// Consecutive overloaded levels so far.
    pub(crate) fn state(&self) -> u32 {
        self.state
    }

    pub(crate) fn confirmed(&self) -> bool {
        self.state >= self.k_ovld
    }
}

/// `P = X/R`; a zero response time (nothing measured) counts as no power
/// rather than infinite power, so it cannot become the best level.
pub(crate) fn power(throughput_rps: f64, response_time_s: f64) -> f64 {
    if response_time_s > 0.0 && throughput_rps.is_finite() {
        throughput_rps / response_time_s
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_worse_levels_in_a_row_confirm_overload() {
        let mut d = OverloadDetector::new(3);
        // Rising part: throughput and power grow.
        assert!(!d.observe(10, 100.0, 0.010));
        assert!(!d.observe(20, 190.0, 0.012));
        assert_eq!(d.state(), 0);
        // Past the knee: lower throughput, longer response times.
        assert!(!d.observe(40, 180.0, 0.2));
        assert_eq!(d.state(), 1);
        assert!(!d.observe(50, 170.0, 0.3));
        assert_eq!(d.state(), 2);
        assert!(d.observe(60, 175.0, 0.4));
    }

    #[test]
    fn a_level_below_the_best_resets_the_state() {
        let mut d = OverloadDetector::new(3);
        d.observe(10, 100.0, 0.010);
        d.observe(40, 90.0, 0.2);
        d.observe(50, 80.0, 0.3);
        assert_eq!(d.state(), 2);
        // Lower load than L_Xmax? No: 30 > 10, but its throughput is a new
        // maximum, so it is not overloaded.
        d.observe(30, 120.0, 0.05);
        assert_eq!(d.state(), 0);
        // Left of the best levels: not overloaded whatever its figures.
        d.observe(20, 60.0, 0.5);
        assert_eq!(d.state(), 0);
    }

    #[test]
    fn higher_throughput_alone_is_not_overload() {
        // A CPU bottleneck by MVA: X keeps rising slowly, power falls.
        let mut d = OverloadDetector::new(2);
        d.observe(100, 200.0, 0.01);
        d.observe(150, 240.0, 0.1);
        d.observe(200, 248.0, 0.3);
        d.observe(250, 249.0, 0.5);
        assert_eq!(d.state(), 0);
        assert_eq!(power(10.0, 0.0), 0.0);
    }
}
