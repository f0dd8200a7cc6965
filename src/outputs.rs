//! What a run shows the world while it goes: the `/metrics` server
//! (`--metrics-listen`) and the push exporters (`--push-remote-write`,
//! `--push-otlp`), both fed by one metrics registry the live view keeps.

use std::path::Path;
use std::sync::{Arc, Mutex};

use autoperf_core::record::RunRecord;
use autoperf_core::report::prometheus::{
    serve_metrics, MetricsRegistry, MetricsServer, SharedMetrics,
};
use autoperf_core::report::push::{PushKind, PushTarget, Pusher, RunLabels};
use autoperf_core::scenario::Scenario;

use crate::cli::OutputArgs;
use crate::Failure;

pub struct LiveOutputs {
    metrics: Option<SharedMetrics>,
    _server: Option<MetricsServer>,
    pusher: Option<Pusher>,
}

impl LiveOutputs {
    /// Checks the flags and starts what they ask for, before any load: a
    /// bad URL or header is exit 2, a port that cannot be bound exit 3.
    pub fn start(
        scenario: &Scenario,
        out: &Path,
        output: &OutputArgs,
        quiet: bool,
    ) -> Result<LiveOutputs, Failure> {
        let targets = push_targets(output)?;
        let metrics = (output.metrics_listen.is_some() || !targets.is_empty()).then(|| {
            let names = scenario.requests.iter().map(|r| r.name.clone()).collect();
            Arc::new(Mutex::new(MetricsRegistry::new(names))) as SharedMetrics
        });
        let server = match (output.metrics_listen, &metrics) {
            (Some(addr), Some(shared)) => {
                let server = serve_metrics(addr, shared.clone()).map_err(|e| {
                    Failure::cannot_proceed(format!("--metrics-listen {addr}: {e}"))
                })?;
                if !quiet {
                    eprintln!("metrics: http://{}/metrics", server.local_addr());
                }
                Some(server)
            }
            _ => None,
        };
        let pusher = match (&metrics, targets.is_empty()) {
            (Some(shared), false) => {
                let run = RunLabels {
                    scenario: scenario.name.clone(),
                    run: out
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                };
                let pusher =
                    Pusher::start(targets, shared.clone(), run, output.push_interval, quiet)
                        .map_err(|e| {
                            Failure::cannot_proceed(format!("cannot start pushing metrics: {e}"))
                        })?;
                Some(pusher)
            }
            _ => None,
        };
        Ok(LiveOutputs {
            metrics,
            _server: server,
            pusher,
        })
    }

    /// The registry the live view feeds, when anything reads it.
    pub fn metrics(&self) -> Option<&SharedMetrics> {
        self.metrics.as_ref()
    }

    /// After the run: the last push goes out (within a few seconds,
    /// whatever the endpoints do), and an endpoint that failed joins the
    /// run's warnings — and stderr, even with `--quiet`: metrics a
    /// dashboard never got are news.
    pub fn finish(self, record: &mut RunRecord) {
        if let Some(pusher) = self.pusher {
            let warnings = pusher.finish().warnings();
            for w in &warnings {
                eprintln!("warning: {w}");
            }
            record.warnings.extend(warnings);
        }
    }
}

/// `--push-remote-write`, `--push-otlp` and `--push-header`, checked before
/// any load.
fn push_targets(output: &OutputArgs) -> Result<Vec<PushTarget>, Failure> {
    let mut headers = Vec::new();
    for h in &output.push_header {
        match h.split_once(':') {
            Some((name, value)) if !name.trim().is_empty() && !h.contains(['\r', '\n']) => {
                headers.push((name.trim().to_string(), value.trim().to_string()))
            }
            _ => {
                return Err(Failure::bad_input(format!(
                    "--push-header `{h}`: expected NAME: VALUE, e.g. 'Authorization: Bearer TOKEN'"
                )))
            }
        }
    }
    let urls = output
        .push_remote_write
        .iter()
        .map(|u| (PushKind::RemoteWrite, u))
        .chain(output.push_otlp.iter().map(|u| (PushKind::Otlp, u)));
    urls.map(|(kind, url)| {
        let mut target = PushTarget::parse(kind, url).map_err(Failure::bad_input)?;
        target.headers = headers.clone();
        Ok(target)
    })
    .collect()
}
