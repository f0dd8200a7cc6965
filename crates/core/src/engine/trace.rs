//! `autoperf run --trace`: a few users walk a few sessions each, one after
//! another, and every exchange is printed as it happens — each request as
//! it went out (redirect hops too), the answer's head and an excerpt of its
//! body, the outcome, each check passed or failed, the values extracted,
//! and the transition taken with the probabilities and conditions it was
//! drawn from. The loop in which a scenario gets written: the same users,
//! templates, checks and conditions as a measured run, none of its timing
//! (think times are named, not waited).

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;
use std::sync::Arc;

use super::error::EngineError;
use super::feed::Feeds;
use super::level::Workload;
use super::tracer::{TraceSummary, Tracer};
use super::user::{trace_session, Shared, User};
use crate::measure::IntervalStats;
use crate::protocol::{HttpTransport, Transport};
use crate::scenario::{Endpoint, Scenario};

/// Runs `users` users of `scenario` for `sessions` sessions each, one
/// after another, printing every exchange to `out`.
pub fn trace(
    scenario: Arc<Scenario>,
    users: u32,
    sessions: u32,
    out: Box<dyn Write>,
) -> Result<TraceSummary, EngineError> {
    let Endpoint::Http(base) = &scenario.target.endpoint else {
        return Err(EngineError::Start(
            "--trace shows HTTP exchanges; a Kafka target's records are traced by their counts in a short `run`".into(),
        ));
    };
    let transport = HttpTransport::new(&scenario, base)?.traced();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| EngineError::Start(e.to_string()))?;
    let shared = Rc::new(Shared {
        hooks: super::hooks::Hooks::load(&scenario),
        feeder_cursors: Arc::new(Feeds::new(&scenario, 0, 1, 1)),
        scenario: scenario.clone(),
        workload: Workload::Session,
        transport,
        users_started: std::cell::Cell::new(0),
        think_origin: 0.0,
        classes: super::split::ClassDeal::new(
            &scenario,
            &super::split::Load::Closed { users, ramp: None },
        )
        .for_shard(0, 1),
    });
    let tracer = Rc::new(RefCell::new(Tracer::new(out)));
    let recorder = Rc::new(RefCell::new(IntervalStats::new(scenario.requests.len())));
    runtime.block_on(async {
        // Every class gets a traced user, however few are asked: the
        // first of each class, then as the classes' shares deal them.
        let classes = scenario.classes.len() as u32;
        for u in 1..=users.max(classes) {
            let session = shared.transport.new_session();
            let rng = fastrand::Rng::new();
            let mut user = User::new(shared.clone(), recorder.clone(), rng, session);
            user.set_class(match u <= classes {
                true => (u - 1) as usize,
                false => shared.classes.user(u - 1),
            });
            user.trace(tracer.clone());
            for s in 1..=sessions {
                let class = scenario.classes.get(user.class()).map(|c| c.name.as_str());
                tracer.borrow_mut().session(u, s, class);
                if !trace_session(&mut user).await {
                    break;
                }
            }
        }
    });
    let summary = tracer.borrow().summary();
    Ok(summary)
}
