//! A user's think times keep their configured mean. Each user draws its
//! uniforms from a Kronecker sequence, `u_k = frac(u₀ + k·φ⁻¹)` (φ the
//! golden ratio, the additive recurrence of lowest discrepancy), started at
//! a random `u₀` (a Cranley–Patterson rotation): every draw is uniform, so
//! every think time follows the configured distribution through its
//! inverse CDF, but n draws cover [0, 1) evenly, so their mean strays from
//! the configured one far less than independent draws' 1/√n: at 760
//! exponential draws, 0.34% (median over random starts; 0.8% at the 90th
//! percentile) where independent draws give 3.6% — which a short level's
//! throughput inherits by Little's law.
//!
//! A rotation does not forget where it started, so the stream must start
//! where a user running all along would be: inside a think time caught at
//! a random moment (length-biased), its draw the stream's last, with a
//! uniform part of it still to wait ([`ThinkStream::stationary`]). Started
//! afresh beside an independent first pause, every stream biased a 20 s
//! level of 40 users 1.5% low in throughput (simulated; 1.2% measured on
//! the testbed against a 5-minute level), 0.4% over 60 s.
//!
//! Where each user stands is itself spread evenly over its shard's users
//! ([`place`]): user k's uniform is the k-th point of a van der Corput
//! sequence (base 3) from a random origin, taken through the length-biased
//! distribution's inverse CDF. Each user's start is still a length-biased
//! draw, but a shard's users no longer crowd at one part of the sequence:
//! simulated (40 users, exponential 1 s, 20 s), the throughput's spread
//! falls from 1.63% to 1.13% (1.16% as two shards of 20), with no bias.

use std::time::Duration;

use crate::scenario::ThinkTime;

/// φ⁻¹ = (√5 − 1) / 2.
const GOLDEN: f64 = 0.618_033_988_749_894_9;

#[derive(Debug, Clone, Copy)]
pub(crate) struct ThinkStream(f64);

impl ThinkStream {
    /// A stream starting at `start` (uniform in [0, 1)).
    pub(crate) fn new(start: f64) -> ThinkStream {
        ThinkStream(start.fract())
    }

    /// A stream as if its user had been thinking all along: it stands in
    /// a think time caught at a random moment (the length-biased draw of
    /// `place`, uniform in [0, 1)), and what remains of that think time
    /// (its share `rest`, uniform) is the user's first pause.
    pub(crate) fn stationary(think: &ThinkTime, place: f64, rest: f64) -> (ThinkStream, Duration) {
        let u = think.length_biased(place);
        (ThinkStream(u), think.sample(u).mul_f64(rest))
    }

    /// The next uniform in [0, 1).
    pub(crate) fn next(&mut self) -> f64 {
        self.0 = (self.0 + GOLDEN).fract();
        self.0
    }
}

/// Where the `k`-th user of a shard stands, uniform in [0, 1): the k-th
/// point of the van der Corput sequence in base 3 (k's base-3 digits
/// mirrored), rotated by the shard's random `origin`. Any first n users
/// are spread evenly. Base 3, not 2: the halves of `UserTally` are dealt
/// by k's parity, which in base 2 is the first digit, so each half would
/// stand in one half of the range and the halves would differ by
/// construction, not only by chance.
pub(crate) fn place(origin: f64, k: u64) -> f64 {
    let (mut rest, mut scale, mut corput) = (k, 1.0 / 3.0, 0.0);
    while rest > 0 {
        corput += (rest % 3) as f64 * scale;
        rest /= 3;
        scale /= 3.0;
    }
    (origin + corput).fract()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kolmogorov–Smirnov distance between the draws and `cdf`.
    fn ks(draws: &mut [f64], cdf: impl Fn(f64) -> f64) -> f64 {
        draws.sort_by(f64::total_cmp);
        let n = draws.len() as f64;
        draws
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let f = cdf(x);
                (f - i as f64 / n).abs().max((f - (i + 1) as f64 / n).abs())
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn draws_follow_the_distribution_and_keep_its_mean() {
        let mut rng = fastrand::Rng::with_seed(7);
        let exp = ThinkTime::Exponential {
            mean: Duration::from_secs(1),
        };
        let lognormal = ThinkTime::LogNormal {
            mean: Duration::from_secs(1),
            cv: 2.0,
        };
        let mut errors = Vec::new();
        for user in 0..20 {
            let mut stream = ThinkStream::new(rng.f64());
            let mut draws: Vec<f64> = (0..500)
                .map(|_| exp.sample(stream.next()).as_secs_f64())
                .collect();
            let mean = draws.iter().sum::<f64>() / draws.len() as f64;
            // Independent draws stray by 4.5% (one standard error) at 500;
            // these by 0.5% (median), 2.4% at worst over 2,000 starts.
            assert!((mean - 1.0).abs() < 0.03, "user {user}: mean {mean}");
            errors.push((mean - 1.0).abs());
            // KS at the 1% level for n = 500 is 0.073.
            let d = ks(&mut draws, |x| 1.0 - (-x).exp());
            assert!(d < 0.073, "user {user}: KS distance {d}");
        }
        errors.sort_by(f64::total_cmp);
        assert!(errors[10] < 0.01, "median error {}", errors[10]);
        let mut stream = ThinkStream::new(0.3);
        let draws: Vec<f64> = (0..2000)
            .map(|_| lognormal.sample(stream.next()).as_secs_f64())
            .collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean - 1.0).abs() < 0.05, "lognormal mean {mean}");
    }

    /// Think times (s) ended in [0, window) by each of `users` users, each
    /// starting as `start` says: a stream and a first pause.
    fn mean_count(
        users: u32,
        window: f64,
        think: &ThinkTime,
        mut start: impl FnMut(&mut fastrand::Rng) -> (ThinkStream, Duration),
    ) -> f64 {
        let mut rng = fastrand::Rng::with_seed(11);
        let mut count = 0u64;
        for _ in 0..users {
            let (mut stream, first) = start(&mut rng);
            let mut t = first.as_secs_f64();
            while t < window {
                count += 1;
                t += think.sample(stream.next()).as_secs_f64();
            }
        }
        count as f64 / users as f64
    }

    #[test]
    fn a_stationary_start_counts_as_many_think_times_as_the_long_run() {
        // In the long run a user ends window/mean think times in a window.
        // Started afresh beside an independent first pause the streams
        // count fewer (the rotation remembers its start); started where a
        // user running all along would be, as many.
        let window = 20.0;
        let second = Duration::from_secs(1);
        for think in [
            ThinkTime::Exponential { mean: second },
            ThinkTime::Uniform {
                min: second / 2,
                max: second * 3 / 2,
            },
            ThinkTime::LogNormal {
                mean: second,
                cv: 2.0,
            },
        ] {
            let stationary = mean_count(4000, window, &think, |rng| {
                ThinkStream::stationary(&think, rng.f64(), rng.f64())
            });
            assert!(
                (stationary / window - 1.0).abs() < 0.006,
                "{think:?}: {stationary} in {window} s"
            );
        }
        let exp = ThinkTime::Exponential { mean: second };
        let afresh = mean_count(4000, window, &exp, |rng| {
            (ThinkStream::new(rng.f64()), exp.sample(rng.f64()))
        });
        assert!(afresh / window < 0.99, "{afresh} in {window} s");
    }

    /// The length-biased draw has mean E[Z²]/E[Z] = mean·(1 + cv²), and
    /// evenly spread uniforms give evenly spread draws (it is monotone).
    #[test]
    fn length_biased_draws_have_the_mean_of_a_pause_caught_at_random() {
        let second = Duration::from_secs(1);
        for (think, expected) in [
            (ThinkTime::Exponential { mean: second }, 2.0),
            (
                ThinkTime::Uniform {
                    min: second / 2,
                    max: second * 3 / 2,
                },
                1.0 + 1.0 / 12.0,
            ),
            (
                ThinkTime::LogNormal {
                    mean: second,
                    cv: 1.0,
                },
                2.0,
            ),
        ] {
            let n = 100_000;
            let mut last = 0.0;
            let mut sum = 0.0;
            for i in 0..n {
                let u = think.length_biased((i as f64 + 0.5) / n as f64);
                assert!(u >= last, "{think:?}: not monotone at {i}");
                last = u;
                sum += think.sample(u).as_secs_f64();
            }
            let mean = sum / n as f64;
            assert!(
                (mean / expected - 1.0).abs() < 0.01,
                "{think:?}: {mean} for {expected}"
            );
        }
    }

    /// Total think times ended in [0, window) by `users` users per level,
    /// over `levels` levels, each user placed by `place_of(rng, k)`.
    fn level_counts(
        levels: u32,
        users: u64,
        window: f64,
        think: &ThinkTime,
        mut place_of: impl FnMut(&mut fastrand::Rng, f64, u64) -> f64,
    ) -> Vec<f64> {
        let mut rng = fastrand::Rng::with_seed(5);
        (0..levels)
            .map(|_| {
                let origin = rng.f64();
                let mut count = 0u64;
                for k in 0..users {
                    let place = place_of(&mut rng, origin, k);
                    let (mut stream, first) = ThinkStream::stationary(think, place, rng.f64());
                    let mut t = first.as_secs_f64();
                    while t < window {
                        count += 1;
                        t += think.sample(stream.next()).as_secs_f64();
                    }
                }
                count as f64
            })
            .collect()
    }

    fn mean_and_spread(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var.sqrt())
    }

    #[test]
    fn users_placed_evenly_spread_their_shards_count_less_and_keep_its_mean() {
        let exp = ThinkTime::Exponential {
            mean: Duration::from_secs(1),
        };
        let (users, window) = (40, 20.0);
        let random = level_counts(600, users, window, &exp, |rng, _, _| rng.f64());
        let even = level_counts(600, users, window, &exp, |_, origin, k| place(origin, k));
        let (random_mean, random_spread) = mean_and_spread(&random);
        let (even_mean, even_spread) = mean_and_spread(&even);
        // In the long run: users × window / mean think times in the window.
        for mean in [random_mean, even_mean] {
            assert!((mean / 800.0 - 1.0).abs() < 0.005, "mean count {mean}");
        }
        // Simulated over 1,000 levels: 1.63% against 1.13%.
        assert!(
            even_spread < 0.85 * random_spread,
            "spread {even_spread} placed evenly, {random_spread} at random"
        );
    }

    /// Each half of the users (by parity) stands all over the range too.
    #[test]
    fn any_first_users_of_a_shard_stand_evenly_spread() {
        for half in [0u64, 1] {
            let places: Vec<f64> = (0..18).map(|j| place(0.0, 2 * j + half)).collect();
            for third in 0..3 {
                let inside = places
                    .iter()
                    .filter(|&&p| (p * 3.0) as usize == third)
                    .count();
                assert_eq!(inside, 6, "half {half}, third {third}: {places:?}");
            }
        }
        for n in [1u64, 3, 8, 13, 40] {
            let mut places: Vec<f64> = (0..n).map(|k| place(0.37, k)).collect();
            places.sort_by(f64::total_cmp);
            // Every gap (around the circle) at most three times the even
            // one.
            let gaps = places
                .windows(2)
                .map(|w| w[1] - w[0])
                .chain(std::iter::once(1.0 + places[0] - places[n as usize - 1]));
            for gap in gaps {
                assert!(gap <= 3.0 / n as f64 + 1e-12, "{n} users: gap {gap}");
            }
        }
    }
}
