//! The model's points for the scenario's workload classes (`classes:`):
//! each class its own class of the network (`model::multiclass`), so a
//! point gives every class's throughput and response time, and a what-if
//! may change one class's users ("what if buyers double?").

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Point;
use crate::model::multiclass::{self, Station};
use crate::model::Model;
use crate::record::round3;

/// One workload class at a point of the model.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClassPoint {
    pub users: u32,
    pub throughput_rps: f64,
    pub response_time_ms: f64,
}

/// One workload class of a measured level against the model.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClassComparison {
    pub users: u32,
    pub measured_throughput_rps: f64,
    pub model_throughput_rps: f64,
    pub throughput_error: f64,
    pub measured_response_time_ms: f64,
    pub model_response_time_ms: f64,
}

/// The model at `population` (users per workload class, in the model's
/// order): one point, its users their sum; solved exactly when `exact`.
pub(crate) fn point(model: &Model, population: &[u32], exact: bool) -> Point {
    let groups = model.stations();
    let class_demand: Vec<Vec<f64>> = model
        .user_classes
        .iter()
        .map(|c| c.demand_s(model))
        .collect();
    let stations: Vec<Station> = groups
        .iter()
        .map(|g| {
            let name: Vec<&str> = g.iter().map(|&t| model.tiers[t].name.as_str()).collect();
            let demands = class_demand
                .iter()
                .map(|d| g.iter().map(|&t| d[t]).sum())
                .collect();
            Station::queue(&name.join("+"), model.station_cores(g), demands)
        })
        .collect();
    let think: Vec<f64> = model.user_classes.iter().map(|c| c.think_s).collect();
    let solved = multiclass::solve(&stations, &think, population, exact);
    let x: Vec<f64> = solved.throughput.clone();
    let x_all: f64 = x.iter().sum();
    // Time per unit of demand, per class at each tier: its station's
    // stretch for that class.
    let mut stretch = vec![vec![1.0; model.tiers.len()]; x.len()];
    let mut utilization = BTreeMap::new();
    let mut per_process = BTreeMap::new();
    for (s, g) in groups.iter().enumerate() {
        for (c, st) in stretch.iter_mut().enumerate() {
            let d = stations[s].demands[c];
            for &t in g {
                st[t] = if d > 0.0 {
                    solved.residence_s[s][c] / d
                } else {
                    1.0
                };
            }
        }
        for &t in g {
            let u: f64 = x.iter().zip(&class_demand).map(|(x, d)| x * d[t]).sum();
            utilization.insert(model.tiers[t].name.clone(), round3(u));
            for (p, share) in &model.process_share[t] {
                per_process.insert(format!("{}/{p}", model.tiers[t].name), round3(u * share));
            }
        }
    }
    // A request type's time: as each class sends it, weighted by how many
    // of it each class sends.
    let per_request_ms = model
        .classes
        .iter()
        .enumerate()
        .map(|(r, name)| {
            let (mut sum, mut weight) = (0.0, 0.0);
            for (c, class) in model.user_classes.iter().enumerate() {
                let w = x[c] * class.mix[r];
                let ms: f64 = model.demand_s[r]
                    .iter()
                    .zip(&stretch[c])
                    .map(|(d, s)| d * s)
                    .sum::<f64>()
                    * 1e3;
                sum += w * ms;
                weight += w;
            }
            (
                name.clone(),
                round3(if weight > 0.0 { sum / weight } else { 0.0 }),
            )
        })
        .collect();
    let response_s = match x_all > 0.0 {
        true => {
            x.iter()
                .zip(&solved.response_s)
                .map(|(x, r)| x * r)
                .sum::<f64>()
                / x_all
        }
        false => 0.0,
    };
    let bottleneck = stations
        .iter()
        .zip(&solved.utilization)
        .max_by(|a, b| {
            (a.1 / a.0.servers.max(1) as f64).total_cmp(&(b.1 / b.0.servers.max(1) as f64))
        })
        .map_or(String::new(), |(s, _)| s.name.clone());
    Point {
        users: Some(population.iter().sum()),
        rate_rps: None,
        throughput_rps: round3(x_all),
        response_time_ms: round3(response_s * 1e3),
        per_request_ms,
        utilization,
        utilization_per_process: per_process,
        bottleneck,
        saturated: false,
        memory_bytes: BTreeMap::new(),
        per_class: model
            .user_classes
            .iter()
            .enumerate()
            .map(|(c, class)| {
                let point = ClassPoint {
                    users: population[c],
                    throughput_rps: round3(x[c]),
                    response_time_ms: round3(solved.response_s[c] * 1e3),
                };
                (class.name.clone(), point)
            })
            .collect(),
    }
}
