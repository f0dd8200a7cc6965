//! `run --trace` from the user's side: a session walked without waiting
//! out think times, and each exchange handed to the tracer with what the
//! user saw of it.

use std::cell::RefCell;
use std::rc::Rc;

use super::super::tracer::{Exchange, Tracer};
use super::{Stepped, User};
use crate::measure::stats::CheckCount;
use crate::protocol::{CallOutcome, Transport};
use crate::scenario::RequestId;

/// Requests a traced session comes to, at most.
const MAX_TRACED_STEPS: u32 = 1000;

/// One traced session (`run --trace`): the walk `run_user` makes, without
/// waiting out think times; false when a `unique` feeder ran out.
pub(crate) async fn trace_session<T: Transport>(user: &mut User<T>) -> bool {
    let scenario = user.shared.scenario.clone();
    user.begin_session();
    let mut current = scenario.session_of(user.class).first(user.rng.f64());
    for step in 1.. {
        // A loop only a condition ends may never end: a trace does.
        if step > MAX_TRACED_STEPS {
            if let Some(tracer) = &user.trace {
                tracer.borrow_mut().cut(MAX_TRACED_STEPS);
            }
            break;
        }
        if user.step_without_think(current, None).await != Stepped::Skipped {
            let think = scenario
                .think_after(user.class, current)
                .sample(user.think.next());
            if let Some(tracer) = &user.trace {
                tracer.borrow_mut().think(think);
            }
        }
        if user.exhausted {
            user.shared.transport.end_session(&mut user.session);
            return false;
        }
        match user.next(current) {
            Some(next) => current = next,
            None => break,
        }
    }
    user.shared.transport.end_session(&mut user.session);
    true
}

impl<T: Transport> User<T> {
    /// Its class (`classes:`; 0 without).
    pub(crate) fn class(&self) -> usize {
        self.class
    }

    /// Makes it a user of class `class`.
    pub(crate) fn set_class(&mut self, class: usize) {
        self.class = class;
    }

    /// Prints what the user does to `tracer` (`run --trace`).
    pub(crate) fn trace(&mut self, tracer: Rc<RefCell<Tracer>>) {
        self.trace = Some(tracer);
    }

    /// Hands the exchange of `current` to the tracer: its checks judged
    /// (their counts went from `before` to `after`), its values, when its
    /// extracts ran (`extracted`).
    pub(super) fn trace_exchange(
        &mut self,
        current: RequestId,
        outcome: &CallOutcome,
        before: &[CheckCount],
        after: &[CheckCount],
        extracted: bool,
    ) {
        let Some(tracer) = self.trace.clone() else {
            return;
        };
        let shared = self.shared.clone();
        let request = shared.scenario.request(current);
        let checks = request
            .checks
            .iter()
            .zip(
                after
                    .iter()
                    .zip(before.iter().chain(std::iter::repeat(&Default::default()))),
            )
            .filter(|(_, (a, b))| a != b)
            .map(|(c, (a, b))| (c.name.as_str(), a.passed > b.passed))
            .collect();
        // Extracts ran only after a passing response.
        let extracts = if extracted {
            &request.extracts[..]
        } else {
            &[]
        };
        let extracted = extracts
            .iter()
            .map(|e| {
                let value = String::from_utf8_lossy(&self.vars[e.var.index()]).into_owned();
                (shared.scenario.variables[e.var.index()].as_str(), value)
            })
            .collect();
        tracer.borrow_mut().exchange(Exchange {
            request: &request.name,
            hops: self.shared.transport.take_hops(&mut self.session),
            result: outcome.result,
            response_time: outcome.response_time,
            body: &self.response.body,
            checks,
            extracted,
            script_failure: self.script_failure.as_deref(),
        });
    }
}
