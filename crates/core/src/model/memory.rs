//! Memory against load: each tier's resident memory over a closed
//! workload's levels, fitted as a line in the users, `M(N) = M₀ + m·N`
//! (least squares over each level's mean memory): the idle baseline `M₀`
//! and what each user holds, `m` (a session, its connection, its caches).
//! A prediction then says how much memory N users take beside their
//! throughput and response time — the resource that ends most capacity
//! plans in containers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::measure::round_to;
use crate::record::LevelRecord;

/// One tier's fitted memory line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MemoryFit {
    /// `M₀`: the memory at no users.
    pub baseline_bytes: f64,
    /// `m`: what each further user adds.
    pub per_user_bytes: f64,
    /// The levels it was fitted to, and how far apart their user counts
    /// were (a fit over 1 to 4 users says little about 400).
    pub levels: usize,
    pub users_from: u32,
    pub users_to: u32,
    /// The share of the levels' variation the line explains (1 when the
    /// memory is a line in the users).
    pub r_squared: f64,
}

impl MemoryFit {
    /// The memory at `users`, never below nothing.
    pub(crate) fn at(&self, users: u32) -> u64 {
        (self.baseline_bytes + self.per_user_bytes * f64::from(users)).max(0.0) as u64
    }
}

/// Each tier's line over `levels` (those with users, that ran to the end,
/// and whose tier reported memory); a tier needs levels at two user counts
/// or more.
pub fn fit(levels: &[LevelRecord]) -> BTreeMap<String, MemoryFit> {
    let mut points: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for l in levels.iter().filter(|l| !l.interrupted) {
        let Some(users) = l.users.filter(|&u| u > 0) else {
            continue;
        };
        for (tier, usage) in &l.servers {
            if usage.memory_mean_bytes > 0 {
                points
                    .entry(tier)
                    .or_default()
                    .push((f64::from(users), usage.memory_mean_bytes as f64));
            }
        }
    }
    points
        .into_iter()
        .filter_map(|(tier, p)| Some((tier.to_string(), line(&p)?)))
        .collect()
}

/// Least squares through `(users, bytes)`.
fn line(points: &[(f64, f64)]) -> Option<MemoryFit> {
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if points.len() < 2 || sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let slope = sxy / sxx;
    let intercept = mean_y - slope * mean_x;
    let syy: f64 = points.iter().map(|p| (p.1 - mean_y).powi(2)).sum();
    let residual: f64 = points
        .iter()
        .map(|p| (p.1 - intercept - slope * p.0).powi(2))
        .sum();
    let users = |f: fn(f64, f64) -> f64| points.iter().map(|p| p.0).fold(points[0].0, f) as u32;
    Some(MemoryFit {
        baseline_bytes: intercept.round(),
        per_user_bytes: slope.round(),
        levels: points.len(),
        users_from: users(f64::min),
        users_to: users(f64::max),
        r_squared: if syy > 0.0 {
            round_to(1.0 - residual / syy, 4)
        } else {
            1.0
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_through_the_levels_memory() {
        // 8 MB idle, 1 MiB a user, measured at 2, 4 and 8 users.
        let points: Vec<(f64, f64)> = [2.0, 4.0, 8.0]
            .iter()
            .map(|&u| (u, 8e6 + u * 1_048_576.0))
            .collect();
        let f = line(&points).unwrap();
        assert_eq!((f.baseline_bytes, f.per_user_bytes), (8e6, 1_048_576.0));
        assert_eq!(
            (f.levels, f.users_from, f.users_to, f.r_squared),
            (3, 2, 8, 1.0)
        );
        assert_eq!(f.at(100), 8_000_000 + 104_857_600);
        // One user count says nothing of a slope.
        assert_eq!(line(&[(4.0, 1e6), (4.0, 2e6)]), None);
        assert_eq!(line(&[(4.0, 1e6)]), None);
    }
}
