//! Client-bottleneck detection (AutoPerf section 2.1.3): a closed-loop load
//! generator that cannot keep up shows it as *think-time inflation*. By
//! Little's law for the closed loop, `N = X · (R + Z_achieved)`, so
//!
//! ```text
//!   Z_achieved = N / X − R
//! ```
//!
//! If the users' requests queue inside the generator (for a CPU, a scheduler,
//! a connection) the time lost shows up in `Z_achieved`, not in `R`, which the
//! generator measures from the first byte written. The paper found this a
//! more reliable sign than the generator's own CPU utilisation (below 70% in
//! every bottlenecked case of its Figure 5).

/// `Z_achieved = N/X − R` in seconds; `None` without throughput.
pub fn achieved_think_time_s(users: u32, throughput_rps: f64, response_time_s: f64) -> Option<f64> {
    (throughput_rps > 0.0).then(|| users as f64 / throughput_rps - response_time_s)
}

/// The paper's test: achieved think time above the configured one by more
/// than `think_gap` (a fraction; `CapacitySettings::think_gap`). With a zero
/// configured think time any relative gap is infinite, so an absolute floor
/// of 1 ms keeps measurement noise (`N/X` and `R` are both estimates) from
/// flagging every level.
pub fn is_client_bottleneck(configured_s: f64, achieved_s: f64, think_gap: f64) -> bool {
    const ABSOLUTE_FLOOR_S: f64 = 0.001;
    achieved_s > configured_s * (1.0 + think_gap) + ABSOLUTE_FLOOR_S
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn little_law_gives_the_achieved_think_time() {
        // 100 users, 1 s think, 10 ms response: X = 100/1.01.
        let z = achieved_think_time_s(100, 100.0 / 1.01, 0.01).unwrap();
        assert!((z - 1.0).abs() < 1e-9);
        assert!(!is_client_bottleneck(1.0, z, 0.10));
        // The generator only manages 60 req/s: Z inflates to 1.657 s.
        let z = achieved_think_time_s(100, 60.0, 0.01).unwrap();
        assert!(is_client_bottleneck(1.0, z, 0.10));
        assert_eq!(achieved_think_time_s(10, 0.0, 0.01), None);
        assert!(!is_client_bottleneck(0.0, 0.0005, 0.10));
    }
}
