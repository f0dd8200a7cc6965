//! What a user's templates (and its script's `request(ctx)`) see while its
//! request is being rendered, and what the script's `response(ctx)` does
//! to an answer.

use super::super::feed::Feeds;
use super::super::hooks::{Hooks, UserTable};
use super::User;
use crate::measure::{ErrorKind, IntervalStats};
use crate::protocol::{CallOutcome, Transport};
use crate::scenario::template::{Bindings, ScriptFailed};
use crate::scenario::{Feeder, FeederId, RequestId, VarId};

/// One user while its request is being rendered.
pub(super) struct UserBindings<'a> {
    pub rng: &'a mut fastrand::Rng,
    pub vars: &'a mut Vec<Vec<u8>>,
    pub feeders: &'a [Feeder],
    pub cursors: &'a Feeds,
    /// Row chosen for each feeder in this rendering: every column of one
    /// feeder in one request comes from the same row.
    pub rows: &'a mut [Option<usize>],
    /// The scenario's script, the request it renders, the user's own table
    /// and where the reason goes when the hook fails the request.
    pub script: Option<Script<'a>>,
}

pub(super) struct Script<'a> {
    pub hooks: &'a Hooks,
    pub request: RequestId,
    pub user: &'a mut UserTable,
    pub failure: &'a mut Option<String>,
}

impl Bindings for UserBindings<'_> {
    fn random(&mut self, lo: i64, hi: i64) -> i64 {
        self.rng.i64(lo..=hi)
    }

    fn unit(&mut self) -> f64 {
        self.rng.f64()
    }

    fn column(&mut self, feeder: FeederId, column: usize) -> &[u8] {
        let f = &self.feeders[feeder.index()];
        let (cursors, rng) = (self.cursors, &mut *self.rng);
        // `unique` rows were taken before rendering (`User::take_rows`).
        let row = *self.rows[feeder.index()]
            .get_or_insert_with(|| cursors.take(feeder, rng).unwrap_or(0));
        f.rows[row][column].as_bytes()
    }

    fn var(&self, var: VarId) -> &[u8] {
        &self.vars[var.index()]
    }

    fn finish_request(&mut self, out: &mut Vec<u8>) -> Result<(), ScriptFailed> {
        let Some(s) = &mut self.script else {
            return Ok(());
        };
        s.hooks
            .on_request(s.request, out, self.vars, s.user)
            .map_err(|reason| {
                *s.failure = Some(reason);
                ScriptFailed
            })
    }
}

impl<T: Transport> User<T> {
    /// Records why the script failed the request, when it did — also
    /// when the request had failed otherwise already (a 401 stays
    /// `http_4xx`, and the script's reason says what the 401 was).
    pub(super) fn note_script_failure(&mut self, rec: &mut IntervalStats, id: RequestId) {
        if let Some(reason) = self.script_failure.take() {
            rec.per_request[id.index()].record_script_failure(&reason, 1);
        }
    }

    /// The script's `response(ctx)` on the answer just kept: a failure
    /// fails the request with its reason.
    pub(super) fn script_response(&mut self, id: RequestId, outcome: &mut CallOutcome) {
        if self.shared.hooks.is_none() {
            return;
        }
        let shared = self.shared.clone();
        let Some(hooks) = &shared.hooks else {
            return;
        };
        // Only what came back is judged: a refused connection has no answer.
        if outcome.status == 0 || !hooks.reads_responses() {
            return;
        }
        let judged = hooks.on_response(
            id,
            outcome.status,
            &mut self.response,
            &mut self.vars,
            &mut self.script_user,
        );
        if let Err(reason) = judged {
            self.script_failure = Some(reason);
            if outcome.result.is_ok() {
                outcome.result = Err(ErrorKind::ScriptResponse);
            }
        }
    }
}
