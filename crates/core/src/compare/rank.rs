//! The Mann–Whitney U test (Wilcoxon rank-sum): does one sample tend to
//! exceed another? Rank-based, so a few seconds the machine stalled in
//! move it no more than any other seconds would — the robustness a
//! comparison of noisy per-second figures needs. p-values from the normal
//! approximation, with the correction for ties and for continuity (good
//! from about five values a side, which `MIN_SAMPLES` asks for).

/// Fewer values than this on either side and no test is made.
pub const MIN_SAMPLES: usize = 5;

/// The two-sided p-value that `a` and `b` come from one distribution, or
/// `None` when either side has fewer than `MIN_SAMPLES` values.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let z = u_statistic(a, b)?;
    Some((2.0 * normal_upper_tail(z.abs())).min(1.0))
}

/// The one-sided p-value against "`high` tends to exceed `low`": small
/// when it does. `None` when either side has fewer than `MIN_SAMPLES`.
pub fn p_exceeds(low: &[f64], high: &[f64]) -> Option<f64> {
    let z = u_statistic(high, low)?;
    Some(normal_upper_tail(z))
}

/// z of `a`'s U statistic (positive when `a` tends to be the larger), with
/// the continuity correction toward zero; 0 when nothing tells the
/// samples apart.
fn u_statistic(a: &[f64], b: &[f64]) -> Option<f64> {
    let (n1, n2) = (a.len(), b.len());
    if n1 < MIN_SAMPLES || n2 < MIN_SAMPLES {
        return None;
    }
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&v| (v, true))
        .chain(b.iter().map(|&v| (v, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    // Ranks from 1, ties sharing their mean rank; Σ(t³ − t) over tie groups.
    let mut rank_sum_a = 0.0;
    let mut ties = 0.0;
    let mut i = 0;
    while i < all.len() {
        let mut j = i + 1;
        while j < all.len() && all[j].0 == all[i].0 {
            j += 1;
        }
        let t = (j - i) as f64;
        let mean_rank = (i + 1 + j) as f64 / 2.0;
        rank_sum_a += mean_rank * all[i..j].iter().filter(|v| v.1).count() as f64;
        ties += t * t * t - t;
        i = j;
    }
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let n = n1f + n2f;
    let u = rank_sum_a - n1f * (n1f + 1.0) / 2.0;
    let mean = n1f * n2f / 2.0;
    let variance = n1f * n2f / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if variance <= 0.0 {
        // Every value equal: nothing tells the samples apart.
        return Some(0.0);
    }
    let d = u - mean;
    Some(d.signum() * (d.abs() - 0.5).max(0.0) / variance.sqrt())
}

/// P(Z > z) for a standard normal Z: erfc(z/√2)/2, by the Numerical Recipes
/// Chebyshev fit of erfc (relative error under 1.2e-7).
fn normal_upper_tail(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    let poly = -x * x - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    let erfc = if x >= 0.0 { erfc } else { 2.0 - erfc };
    erfc / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_normal_tail_matches_known_values() {
        assert!((normal_upper_tail(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_upper_tail(1.959_964) - 0.025).abs() < 1e-6);
        assert!((normal_upper_tail(3.090_232) - 0.001).abs() < 1e-6);
    }

    #[test]
    fn separated_samples_are_significant_and_interleaved_ones_are_not() {
        let a: Vec<f64> = (0..10).map(|i| 10.0 + i as f64 * 0.1).collect();
        let b: Vec<f64> = (0..10).map(|i| 13.0 + i as f64 * 0.1).collect();
        let p = mann_whitney_p(&a, &b).unwrap();
        assert!(p < 0.001, "{p}");
        let c: Vec<f64> = (0..10).map(|i| 10.05 + i as f64 * 0.1).collect();
        let p = mann_whitney_p(&a, &c).unwrap();
        assert!(p > 0.5, "{p}");
    }

    #[test]
    fn a_textbook_example_gives_its_p_value() {
        // U = 3 for n1 = n2 = 5: R's wilcox.test(correct = TRUE,
        // exact = FALSE) gives p = 0.0601 (z = 1.880 after continuity).
        let a = [1.0, 2.0, 3.0, 5.0, 7.0];
        let b = [4.0, 6.0, 8.0, 9.0, 10.0];
        let p = mann_whitney_p(&a, &b).unwrap();
        assert!((p - 0.0601).abs() < 0.001, "{p}");
    }

    #[test]
    fn one_outlier_second_moves_nothing_much() {
        let a: Vec<f64> = (0..20).map(|i| 10.0 + (i % 5) as f64 * 0.2).collect();
        let mut b = a.clone();
        b[3] = 500.0;
        assert!(mann_whitney_p(&a, &b).unwrap() > 0.5);
    }

    #[test]
    fn the_one_sided_test_points_one_way() {
        let low: Vec<f64> = (0..10).map(|i| 10.0 + i as f64 * 0.1).collect();
        let high: Vec<f64> = (0..10).map(|i| 13.0 + i as f64 * 0.1).collect();
        assert!(p_exceeds(&low, &high).unwrap() < 0.001);
        assert!(p_exceeds(&high, &low).unwrap() > 0.999);
        // Half the two-sided p of the textbook example.
        let (a, b) = ([1.0, 2.0, 3.0, 5.0, 7.0], [4.0, 6.0, 8.0, 9.0, 10.0]);
        assert!((p_exceeds(&a, &b).unwrap() - 0.03005).abs() < 0.0005);
    }

    #[test]
    fn too_few_or_all_equal_values_are_told_apart() {
        assert_eq!(mann_whitney_p(&[1.0; 4], &[2.0; 10]), None);
        assert_eq!(mann_whitney_p(&[3.0; 6], &[3.0; 6]), Some(1.0));
        assert!((p_exceeds(&[3.0; 6], &[3.0; 6]).unwrap() - 0.5).abs() < 1e-6);
    }
}
