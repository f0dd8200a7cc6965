//! The search's pure arithmetic, table-tested: an estimate rounded to
//! users, the bisection's piecewise-linear test, the levels past the top.

/// Users for a real-valued estimate: rounded up, at least 1, saturating.
pub(super) fn ceil_users(n: f64) -> u32 {
    if n.is_finite() && n > 0.0 {
        n.ceil().min(u32::MAX as f64) as u32
    } else {
        1
    }
}

/// The piecewise-linear test of the bisection:
/// `|Λ(mid) − line(mid)| ≤ tolerance × max(Λ(lo), Λ(hi))`, the line through
/// the two ends (the paper's `(Λ(lo) + Λ(hi))/2` when `mid` is the exact
/// midpoint; integer midpoints are not always exact).
pub(crate) fn is_linear(
    lo: u32,
    x_lo: f64,
    mid: u32,
    x_mid: f64,
    hi: u32,
    x_hi: f64,
    tolerance: f64,
) -> bool {
    let frac = if hi > lo {
        (mid - lo) as f64 / (hi - lo) as f64
    } else {
        0.5
    };
    let line = x_lo + (x_hi - x_lo) * frac;
    (x_mid - line).abs() <= tolerance * x_lo.max(x_hi)
}

/// The levels past the top: `top × (1 + step·k)` for `k = 1..=count`,
/// rounded, strictly increasing, within the user cap.
pub(crate) fn beyond_levels(top: u32, count: u32, step: f64, max_users: u32) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    for k in 1..=count {
        let users = ceil_users((top as f64 * (1.0 + step * k as f64)).round());
        let users = users.max(out.last().copied().unwrap_or(top) + 1);
        if users > max_users {
            break;
        }
        out.push(users);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::search::StopReason;

    #[test]
    fn the_linearity_test_and_the_levels_beyond() {
        assert!(is_linear(10, 100.0, 20, 200.0, 30, 300.0, 0.05));
        assert!(is_linear(10, 100.0, 20, 214.0, 30, 300.0, 0.05));
        assert!(!is_linear(10, 100.0, 20, 216.0, 30, 300.0, 0.05));
        // An inexact integer midpoint is judged against the line, not the mean.
        assert!(is_linear(10, 10.0, 15, 15.0, 21, 21.0, 0.01));
        assert_eq!(beyond_levels(127, 2, 0.1, 10_000), vec![140, 152]);
        assert_eq!(beyond_levels(5, 3, 0.1, 10_000), vec![6, 7, 8]);
        assert_eq!(beyond_levels(127, 2, 0.1, 145), vec![140]);
        assert_eq!(
            StopReason::ClientBottleneck.to_string(),
            "client_bottleneck"
        );
    }
}
