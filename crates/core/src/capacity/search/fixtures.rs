//! Synthetic levels and curves that the search's unit tests feed it.

use super::{Decision, LevelOutcome, LevelSearch, SearchConfig, Strategy};
use crate::capacity::range::TierDemand;

/// The paper's bisection, whose level sequences these tests spell out.
pub(super) fn paper() -> SearchConfig {
    SearchConfig {
        strategy: Strategy::Bisection,
        ..SearchConfig::default()
    }
}

pub(super) fn web(demand_s: f64) -> Vec<TierDemand> {
    vec![TierDemand {
        tier: "web".into(),
        process: "tb-web".into(),
        demand_s,
        cores: 1,
        ..Default::default()
    }]
}

pub(super) fn level(users: u32, x: f64, r: f64, demands: Vec<TierDemand>) -> LevelOutcome {
    LevelOutcome {
        users,
        throughput_rps: x,
        response_time_s: r,
        think_time_s: 0.5,
        demands,
        load_too_low: false,
        client_bottleneck: false,
        requests: 0,
        precision: None,
    }
}

pub(super) fn run_to_end(s: &mut LevelSearch, curve: impl Fn(u32) -> LevelOutcome) -> Vec<u32> {
    for _ in 0..100 {
        match s.next() {
            Decision::Run { users, .. } => s.record(curve(users)),
            Decision::Done { .. } => break,
        }
    }
    s.outcomes().map(|o| o.users).collect()
}
