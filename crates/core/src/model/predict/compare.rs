//! The model against measured levels: each level's throughput and mean
//! response time beside the model's at its users (with workload classes,
//! at the users it gave each class), with the relative errors and whether
//! the level is one the model describes.

use super::classes::{self, ClassComparison};
use super::{closed, Comparison, UNTRUSTED_GAP};
use crate::measure::round_to;
use crate::model::Model;
use crate::record::LevelRecord;

/// The model against a capacity analysis's measured levels.
pub(crate) fn compare(model: &Model, levels: &[LevelRecord]) -> Vec<Comparison> {
    let users: Vec<u32> = levels.iter().filter_map(|l| l.users).collect();
    let points = match model.user_classes.is_empty() {
        true => closed(model, &users),
        false => Vec::new(),
    };
    let mut levels: Vec<&LevelRecord> = levels.iter().collect();
    levels.sort_by_key(|l| l.users);
    let rel = |model: f64, measured: f64| {
        if measured > 0.0 {
            round_to((model - measured) / measured, 4)
        } else {
            0.0
        }
    };
    levels
        .into_iter()
        .filter(|l| l.users.is_some_and(|u| u > 0) && !l.interrupted)
        .filter_map(|l| {
            let p = match model.user_classes.is_empty() {
                true => points.iter().find(|p| p.users == l.users)?.clone(),
                // The users the level gave each class, when it names them
                // all (its scenario's shares may be another what-if's).
                false => {
                    let population = level_population(model, l);
                    let exact = crate::model::multiclass::exact_fits(&population);
                    classes::point(model, &population, exact)
                }
            };
            let per_class = p
                .per_class
                .iter()
                .filter_map(|(name, m)| {
                    let measured = l.per_class.get(name)?;
                    let c = ClassComparison {
                        users: m.users,
                        measured_throughput_rps: measured.throughput_rps,
                        model_throughput_rps: m.throughput_rps,
                        throughput_error: rel(m.throughput_rps, measured.throughput_rps),
                        measured_response_time_ms: measured.response_time_ms.mean,
                        model_response_time_ms: m.response_time_ms,
                    };
                    Some((name.clone(), c))
                })
                .collect();
            Some(Comparison {
                per_class,
                users: l.users.unwrap_or(0),
                measured_throughput_rps: l.throughput_rps,
                model_throughput_rps: p.throughput_rps,
                throughput_error: rel(p.throughput_rps, l.throughput_rps),
                measured_response_time_ms: l.response_time_ms.mean,
                model_response_time_ms: p.response_time_ms,
                response_time_error: rel(p.response_time_ms, l.response_time_ms.mean),
                model_untrusted: {
                    // A short level's count is itself noisy: a Poisson
                    // count of n strays by √n, so three of those are not
                    // a limit the model misses.
                    let noise = 3.0 / (l.requests.max(1) as f64).sqrt();
                    l.throughput_rps < p.throughput_rps * (1.0 - UNTRUSTED_GAP.max(noise))
                },
                short_of_cpu: crate::record::short_of_cpu(&l.servers),
                measured_throughput_ci95_rps: l.ci95.as_ref().map(|c| c.throughput_rps),
                within_interval: l
                    .ci95
                    .as_ref()
                    .map(|c| (p.throughput_rps - l.throughput_rps).abs() <= c.throughput_rps),
            })
        })
        .collect()
}

/// Users per workload class at level `l`: as it recorded them when it
/// names every class of the model, else its users dealt by the shares.
fn level_population(model: &Model, l: &LevelRecord) -> Vec<u32> {
    let recorded: Option<Vec<u32>> = model
        .user_classes
        .iter()
        .map(|c| l.per_class.get(&c.name).and_then(|m| m.users))
        .collect();
    recorded.unwrap_or_else(|| model.populations(l.users.unwrap_or(0)))
}
