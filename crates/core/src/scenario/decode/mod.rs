//! From YAML text to a validated `Scenario`, collecting every problem with
//! its place instead of stopping at the first.
//!
//! This file decodes the top level (the name, `prerequisites`, `thresholds`)
//! and hands every other section to its decoder; where a decoder fills a
//! part of `model/`, the two files share a name:
//!
//! - `ctx.rs`: the error collector and the typed accessors every decoder
//!   uses, templates and regular expressions included;
//! - `target.rs`: `target`, an HTTP server or a Kafka cluster; `url.rs`:
//!   base URLs; `tls.rs`: TLS settings and the PEM files they name;
//! - `kafka.rs`: `target.kafka`, the producer's settings and security;
//! - `think.rs`: `think_time`, the scenario's and a request's;
//! - `data.rs`: the `data` feeders (CSV files read now, ranges);
//! - `requests.rs`: `requests`, an HTTP request's method, path and headers,
//!   and the variables `extract` binds; `body.rs`: its body (`form`, `json`
//!   or `body`); `checks.rs`: its `check`; `extract.rs`: each `extract`;
//!   `produce.rs`: a Kafka request; `avro.rs`: a record's Avro value;
//! - `session.rs`: `session`, the CBMG; `classes.rs`: `classes`, kinds of
//!   users each with its session, think time and share;
//! - `servers.rs`: `servers`, the process groups profiled; `promql.rs`: a
//!   threshold on a PromQL query;
//! - `capacity.rs`: the `capacity` tunables;
//! - `arrivals.rs`, `users.rs`: an open or a closed workload;
//! - `workers.rs`: `workers`, the load generator hosts.

use std::path::Path;
use std::time::Duration;

mod arrivals;
mod avro;
mod body;
mod capacity;
mod checks;
mod classes;
mod condition;
mod ctx;
mod data;
mod extract;
mod kafka;
mod produce;
mod promql;
pub(crate) mod requests;
mod script;
mod servers;
mod session;
mod set;
mod target;
mod think;
mod tls;
mod url;
mod users;
mod workers;

// The key lists, for the test that every key is documented.
#[cfg(test)]
pub(crate) use {
    avro::AVRO_KEYS, capacity::CAPACITY_KEYS, classes::CLASS_KEYS, data::DATA_KEYS,
    kafka::KAFKA_KEYS, script::SCRIPT_KEYS, servers::SERVER_KEYS, session::SESSION_KEYS,
    target::TARGET_KEYS, tls::TLS_KEYS, url::parse_base_url, workers::WORKERS_KEYS,
};

use super::diagnostic::{did_you_mean, Diagnostic};
use super::model::*;
use super::overrides::Override;
use super::threshold::parse_scoped;
use super::yaml::{self, Node, Pos};
use capacity::decode_capacity;
use ctx::{lookup_request, Ctx};
use data::decode_data;
use requests::{decode_requests, DecodedRequests, TargetKind};
use servers::decode_servers;
use session::decode_session;
use target::decode_target;
use think::decode_think_time;

/// Every top-level key the format accepts. Adding one (`arrivals`, say)
/// means adding it here, to the schema, and decoding it below.
pub(crate) const TOP_LEVEL_KEYS: &[&str] = &[
    "name",
    "target",
    "think_time",
    "data",
    "requests",
    "session",
    "servers",
    "prerequisites",
    "thresholds",
    "capacity",
    "arrivals",
    "users",
    "workers",
    "script",
    "classes",
];

/// Decodes the document's root.
/// Parses and decodes `text`; `file` names it in messages and is where CSV
/// paths are resolved from.
pub fn decode(
    text: &str,
    file: &Path,
    overrides: &[Override],
) -> Result<Scenario, Vec<Diagnostic>> {
    let mut parsed = yaml::parse(text);
    let texts: Vec<String> = overrides.iter().map(|o| o.text.clone()).collect();
    let mut ctx = Ctx {
        file,
        text,
        errors: Vec::new(),
        overrides: &texts,
    };
    for e in &parsed.errors {
        ctx.error(e.pos, e.message.clone());
    }
    if let Some(root) = parsed.root.as_mut() {
        for (pos, message) in super::overrides::apply(root, overrides) {
            ctx.error(pos, message);
        }
    }
    // A syntax error leaves no tree worth checking further.
    if parsed.root.is_none() && !ctx.errors.is_empty() {
        return Err(ctx.errors);
    }
    let root = parsed.root.as_ref();
    let start = Pos { line: 1, column: 1 };
    let Some(root) = root else {
        ctx.error(
            start,
            "expected a scenario mapping with `target` and `requests`, found an empty file",
        );
        return Err(ctx.errors);
    };
    let Some(top) = ctx.map(root, "the scenario (top level)", TOP_LEVEL_KEYS) else {
        return Err(ctx.errors);
    };

    let name = match top.get("name") {
        Some(node) => ctx.string(node, "a scenario name").filter(|n| {
            let ok = !n.trim().is_empty()
                && !n.contains(['/', '\\'])
                && !n.chars().any(char::is_control);
            if !ok {
                ctx.error(
                    node.pos(),
                    format!("expected a scenario name without `/` or `\\`, found `{n}`"),
                );
            }
            ok
        }),
        None => Some(
            file.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "scenario".into()),
        ),
    };
    let base_dir = file.parent().unwrap_or(Path::new("."));
    let target = top
        .required(&mut ctx, "target")
        .and_then(|n| decode_target(&mut ctx, n, base_dir));
    let think_time = match top.get("think_time") {
        Some(node) => decode_think_time(&mut ctx, node),
        None => Some(ThinkTime::Constant(Duration::ZERO)),
    };
    let feeders = top
        .get("data")
        .map(|n| decode_data(&mut ctx, n, base_dir))
        .unwrap_or_default();
    let requests_node = top.required(&mut ctx, "requests");
    let target_kind = target.as_ref().map(|t| match t.endpoint {
        Endpoint::Http(_) => TargetKind::Http,
        Endpoint::Kafka(_) => TargetKind::Kafka,
    });
    let (script, script_vars) = match top.get("script") {
        Some(node) => {
            let feeder_names: Vec<&str> = feeders.iter().map(|f| f.feeder.name.as_str()).collect();
            script::decode_script(&mut ctx, node, base_dir, &feeder_names)
        }
        None => (None, Vec::new()),
    };
    if let (Some(TargetKind::Kafka), Some(key)) = (target_kind, top.key("script")) {
        ctx.error_hint(
            key.pos,
            "`script` hooks HTTP requests; this scenario's target is Kafka",
            Some("a record's key and value are templates: `${…}` computes them".into()),
        );
    }
    let decoded = requests_node.map(|n| {
        decode_requests(
            &mut ctx,
            n,
            &feeders,
            target_kind,
            base_dir,
            &[top.get("session"), top.get("classes")],
            &script_vars,
        )
    });
    let DecodedRequests {
        requests,
        variables,
        keys: request_keys,
    } = decoded.unwrap_or_default();
    if let (Some(node @ Node::Map { .. }), true) = (requests_node, request_keys.is_empty()) {
        ctx.error(
            node.pos(),
            "expected at least one request under `requests`, found none",
        );
    }
    let names: Vec<&str> = request_keys.iter().map(|k| k.name.as_str()).collect();

    let classes_node = top.get("classes");
    let template_names = requests::template_names(&feeders, &variables);
    // With classes, the scenario's session is only what a class without
    // one takes: it need not be there, nor reach every request.
    let session = match (names.is_empty(), top.get("session"), classes_node) {
        (true, _, _) => None,
        (false, None, Some(_)) if names.len() > 1 => None,
        (false, node, classes) => decode_session(
            &mut ctx,
            node,
            &top,
            &request_keys,
            &template_names,
            classes.is_none(),
        ),
    };
    let classes = match (classes_node, think_time.as_ref()) {
        (Some(node), Some(think_time)) if !names.is_empty() => classes::decode_classes(
            &mut ctx,
            node,
            &request_keys,
            &template_names,
            classes::Defaults {
                session: session.as_ref(),
                think_time,
            },
        ),
        (Some(_), _) => None,
        (None, _) => Some(Vec::new()),
    };
    // Without a session of its own, the scenario's is the first class's.
    let session = session
        .map(|(cbmg, _)| cbmg)
        .or_else(|| classes.as_ref()?.first().map(|c| c.session.clone()));
    let servers = top
        .get("servers")
        .map(|n| decode_servers(&mut ctx, n, base_dir))
        .unwrap_or_default();
    let mut prerequisites = Vec::new();
    if let Some(items) = top
        .get("prerequisites")
        .and_then(|n| ctx.seq(n, "`prerequisites`"))
    {
        for item in items {
            if let Some(id) = lookup_request(&mut ctx, item, &names, "prerequisite") {
                prerequisites.push(id);
            }
        }
    }
    let mut thresholds = Vec::new();
    if let Some(items) = top
        .get("thresholds")
        .and_then(|n| ctx.seq(n, "`thresholds`"))
    {
        for item in items {
            if matches!(item, Node::Map { .. }) {
                thresholds.extend(promql::decode_promql_threshold(&mut ctx, item, &servers));
                continue;
            }
            let Some(text) = ctx.string(item, "a threshold like `p99 < 250ms`") else {
                continue;
            };
            let id = |name: &str| {
                names
                    .iter()
                    .position(|n| *n == name)
                    .map(|i| RequestId(i as u32))
            };
            let tiers: Vec<&str> = servers.iter().map(|s| s.tier.as_str()).collect();
            let class_names: Vec<&str> =
                classes.iter().flatten().map(|c| c.name.as_str()).collect();
            match parse_scoped(&text, id, &tiers, &class_names) {
                // A consumer group's lag is read from the Kafka target.
                Ok(t) if t.group.is_some() && target_kind == Some(TargetKind::Http) => ctx.error(
                    item.pos(),
                    format!("`{text}` reads a Kafka consumer group's lag, from a `target: {{kafka: …}}`; this scenario's target is HTTP"),
                ),
                Ok(t) => thresholds.push(t),
                Err(message) => {
                    let hint = message
                        .strip_prefix("unknown request `")
                        .and_then(|rest| rest.strip_suffix('`'))
                        .and_then(|name| did_you_mean(name, names.iter().copied()));
                    ctx.error_hint(item.pos(), message, hint);
                }
            }
        }
    }
    let capacity = match top.get("capacity") {
        Some(node) => decode_capacity(&mut ctx, node),
        None => Some(CapacitySettings::default()),
    };
    let arrivals = match top.get("arrivals") {
        Some(node) => arrivals::decode_arrivals(&mut ctx, node).map(Some),
        None => Some(None),
    };
    let workers = match top.get("workers") {
        Some(node) => workers::decode_workers(&mut ctx, node, base_dir).map(Some),
        None => Some(None),
    };
    let users = match (top.get("users"), top.get("arrivals")) {
        (Some(node), Some(_)) => {
            ctx.error(
                node.pos(),
                "expected `users` (a closed workload) or `arrivals` (an open one), found both",
            );
            None
        }
        (Some(node), None) => users::decode_users(&mut ctx, node).map(Some),
        (None, _) => Some(None),
    };

    match (
        name, target, think_time, session, capacity, arrivals, users, workers, classes,
    ) {
        (
            Some(name),
            Some(target),
            Some(think_time),
            Some(session),
            Some(capacity),
            Some(arrivals),
            Some(users),
            Some(workers),
            Some(classes),
        ) if ctx.errors.is_empty() => Ok(Scenario {
            name,
            source: file.to_path_buf(),
            text: text.to_string(),
            overrides: texts,
            target,
            think_time,
            feeders: feeders.into_iter().map(|f| f.feeder).collect(),
            requests,
            variables,
            session,
            servers,
            prerequisites,
            thresholds,
            capacity,
            arrivals,
            users,
            workers,
            script,
            classes,
        }),
        _ => Err(ctx.errors),
    }
}
