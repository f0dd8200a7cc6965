//! Where a user's session goes: the transitions whose `when:` holds, the
//! requests whose `skip_if:` holds, and a fresh start for each session.

use super::super::level::Workload;
use super::super::tracer::Choice;
use super::User;
use crate::protocol::Transport;
use crate::scenario::{Last, RequestId};

/// Requests skipped in a row after which a session ends: conditions can
/// leave a loop of skipped requests as the only way on.
const MAX_SKIPPED_IN_A_ROW: u32 = 1000;

impl<T: Transport> User<T> {
    /// A session begins: nothing extracted, no request before.
    pub(super) fn begin_session(&mut self) {
        self.vars.iter_mut().for_each(Vec::clear);
        self.last = Last::default();
        self.sent = false;
        self.skipped_in_a_row = 0;
    }

    /// The request after `from`, among the transitions whose `when:` holds.
    pub(super) fn next(&mut self, from: RequestId) -> Option<RequestId> {
        if self.skipped_in_a_row >= MAX_SKIPPED_IN_A_ROW {
            return None;
        }
        let u = self.rng.f64();
        let session = self.shared.scenario.session_of(self.class);
        if self.trace.is_none() && !session.is_conditional(from) {
            return session.next(from, u);
        }
        let shared = self.shared.clone();
        let last = self.last;
        let trace = self.trace.clone();
        let class = self.class;
        let (_, _, mut bindings) = self.parts(None);
        let session = shared.scenario.session_of(class);
        let mut judged = Vec::new();
        let next = session.next_when(from, u, |c| {
            let held = c.holds(&mut bindings, last);
            if trace.is_some() {
                judged.push(held);
            }
            held
        });
        if let Some(tracer) = trace {
            let name = |r: crate::scenario::RequestId| shared.scenario.request(r).name.as_str();
            let mut judged = judged.into_iter();
            let options = session
                .transitions(from)
                .iter()
                .enumerate()
                .map(|(i, &(to, p))| {
                    let when = session
                        .condition(from, i)
                        .map(|c| (c.source(), judged.next().unwrap_or(false)));
                    (name(to), p, when)
                })
                .collect();
            tracer.borrow_mut().transition(Choice {
                from: name(from),
                options,
                exit: session.exit_probability(from),
                to: next.map(name),
            });
        }
        next
    }

    /// Whether `request`'s `skip_if:` holds now. Sessions only: a profiled
    /// request is the load itself.
    pub(super) fn skips(&mut self, request: RequestId) -> bool {
        let shared = self.shared.clone();
        let Some(condition) = &shared.scenario.request(request).skip_if else {
            return false;
        };
        if !matches!(shared.workload, Workload::Session) {
            return false;
        }
        let last = self.last;
        let (_, _, mut bindings) = self.parts(None);
        let skip = condition.holds(&mut bindings, last);
        if let (true, Some(tracer)) = (skip, &self.trace) {
            let name = &shared.scenario.request(request).name;
            tracer.borrow_mut().skipped(name, condition.source());
        }
        skip
    }
}
