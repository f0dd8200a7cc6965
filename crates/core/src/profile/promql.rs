//! The scenario's PromQL thresholds (`thresholds: [{promql: …}]`): each
//! query checked once before the first level, then read over every level's
//! measured window into the level's record, where the thresholds are
//! judged like any other.

use std::collections::BTreeMap;
use std::time::Instant;

use super::agents::AgentError;
use super::prometheus::{self, unix_now, Client};
use crate::record::PromqlFigure;
use crate::scenario::Scenario;

/// Every distinct PromQL threshold query and the Prometheus it asks.
#[derive(Debug, Default)]
pub(crate) struct PromqlSlos {
    queries: Vec<Query>,
}

#[derive(Debug)]
struct Query {
    query: String,
    url: String,
    client: Client,
}

impl PromqlSlos {
    pub(crate) fn from_scenario(scenario: &Scenario) -> Result<PromqlSlos, AgentError> {
        let mut queries: Vec<Query> = Vec::new();
        for p in scenario.thresholds.iter().filter_map(|t| t.promql.as_ref()) {
            if queries.iter().any(|q| q.query == p.query) {
                continue;
            }
            let client = Client::new(&p.url, p.authorization.clone()).map_err(|reason| {
                AgentError::PrometheusTls {
                    tier: "(a PromQL threshold)".into(),
                    url: p.url_text.clone(),
                    reason,
                }
            })?;
            queries.push(Query {
                query: p.query.clone(),
                url: p.url_text.clone(),
                client,
            });
        }
        Ok(PromqlSlos { queries })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queries.is_empty()
    }

    /// Reads every query once, now: an unreachable Prometheus, a query it
    /// refuses or one that selects nothing stops the run before it starts.
    pub(crate) fn check(&self) -> Result<(), AgentError> {
        for q in &self.queries {
            prometheus::check(&q.client, &q.query).map_err(|reason| AgentError::Promql {
                url: q.url.clone(),
                query: q.query.clone(),
                reason,
            })?;
        }
        Ok(())
    }

    /// Every query over `[from, to]`; a query that cannot be read is left
    /// out (its threshold then fails as not measured) and named in the
    /// warnings.
    pub(crate) fn over(
        &self,
        from: Instant,
        to: Instant,
    ) -> (BTreeMap<String, PromqlFigure>, Vec<String>) {
        // Instants → Unix seconds, by how long ago each was.
        let (now, unix) = (Instant::now(), unix_now());
        let at = |i: Instant| unix - now.saturating_duration_since(i).as_secs_f64();
        let mut figures = BTreeMap::new();
        let mut warnings = Vec::new();
        for q in &self.queries {
            match prometheus::over_window(&q.client, &q.query, at(from), at(to)) {
                Ok(f) => {
                    figures.insert(q.query.clone(), f);
                }
                Err(why) => warnings.push(format!(
                    "PromQL threshold `{}` (Prometheus at {}): {why}; it fails as not measured",
                    q.query, q.url
                )),
            }
        }
        (figures, warnings)
    }
}
