//! `workers:` — the load generator workers a run uses, as `--workers`
//! gives them: a list of addresses, or a mapping with the token file and
//! how many to wait for and start on.
//!
//! ```yaml
//! workers: [10.0.0.11:7420, 10.0.0.12:7420]
//! workers:
//!   addresses: ["dns:autoperf-workers.autoperf.svc.cluster.local:7420"]
//!   token_file: worker.token      # from the scenario's directory
//!   ca_file: workers-ca.pem       # TLS to workers with --tls-cert
//!   min: 3                        # wait for three (up to 2 minutes)
//!   start: 1                      # a capacity analysis starts on one
//! ```

use std::path::Path;

use super::super::model::{WorkerSettings, WorkerSpec};
use super::super::yaml::Node;
use super::ctx::Ctx;

pub(crate) const WORKERS_KEYS: &[&str] = &["addresses", "token_file", "ca_file", "min", "start"];

pub(crate) fn decode_workers(
    ctx: &mut Ctx,
    node: &Node,
    base_dir: &Path,
) -> Option<WorkerSettings> {
    if let Node::Seq { .. } = node {
        return Some(WorkerSettings {
            addresses: addresses(ctx, node)?,
            token_file: None,
            ca_file: None,
            min: None,
            start: None,
        });
    }
    let fields = ctx.map(node, "`workers`", WORKERS_KEYS)?;
    let addresses = match fields.get("addresses") {
        Some(n) => addresses(ctx, n),
        None => {
            ctx.error(
                fields.pos,
                "missing required key `addresses` in `workers` (host:port or dns:NAME:PORT)",
            );
            None
        }
    };
    let mut path = |key: &str, what: &str| match fields.get(key) {
        Some(n) => Some(ctx.setting(n, what).map(|p| base_dir.join(p))),
        None => Some(None),
    };
    let token_file = path("token_file", "a token file path");
    let ca_file = path("ca_file", "a PEM file of the workers' CA");
    let count = |ctx: &mut Ctx, key: &str| match fields.get(key) {
        Some(n) => ctx
            .integer(n, 1, "a number of workers of at least 1")
            .map(|v| Some(v.min(u64::from(u32::MAX)) as u32)),
        None => Some(None),
    };
    let min = count(ctx, "min");
    let start = count(ctx, "start");
    Some(WorkerSettings {
        addresses: addresses?,
        token_file: token_file?,
        ca_file: ca_file?,
        min: min?,
        start: start?,
    })
}

fn addresses(ctx: &mut Ctx, node: &Node) -> Option<Vec<WorkerSpec>> {
    let items = ctx.seq(
        node,
        "a list of worker addresses (host:port or dns:NAME:PORT)",
    )?;
    if items.is_empty() {
        ctx.error(
            node.pos(),
            "expected at least one worker address, found none",
        );
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    for item in items {
        let Some(text) = ctx.setting(item, "a worker address (host:port or dns:NAME:PORT)") else {
            ok = false;
            continue;
        };
        match WorkerSpec::parse(&text) {
            Ok(spec) => out.push(spec),
            Err(_) => {
                ctx.error(
                    item.pos(),
                    format!("expected a worker address like 10.0.0.5:7420 or dns:NAME:PORT, found `{text}`"),
                );
                ok = false;
            }
        }
    }
    ok.then_some(out)
}
