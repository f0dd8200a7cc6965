//! From YAML text to a validated `Scenario`, collecting every problem with
//! its place instead of stopping at the first.
//!
//! This file decodes the top level, the target, think time, servers,
//! prerequisites, thresholds and capacity settings. `ctx.rs` holds the error
//! collector and typed accessors; `data.rs` reads the CSV feeders,
//! `requests.rs` the requests and their templates, `session.rs` the CBMG.

use std::path::Path;
use std::time::Duration;

mod arrivals;
mod avro;
mod users;
mod workers;
pub use avro::AVRO_KEYS;
pub use data::DATA_KEYS;
pub use session::SESSION_KEYS;
pub use url::parse_base_url;
pub use workers::WORKERS_KEYS;
mod ctx;
mod data;
mod kafka;
pub mod requests;
mod session;
mod url;

use super::diagnostic::{did_you_mean, Diagnostic};
use super::files;
use super::model::*;
use super::overrides::Override;
use super::threshold::parse_threshold;
use super::yaml::{self, Node, Pos};
use ctx::{lookup_request, Ctx};
use data::decode_data;
use requests::{decode_requests, DecodedRequests, TargetKind};
use session::decode_session;

/// Every top-level key the format accepts. Adding one (`arrivals`, say)
/// means adding it here, to the schema, and decoding it below.
pub const TOP_LEVEL_KEYS: &[&str] = &[
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
];
pub const TARGET_KEYS: &[&str] = &[
    "base_url",
    "compression",
    "cookies",
    "http",
    "kafka",
    "streams_per_connection",
    "timeout",
    "tls",
];
pub const TLS_KEYS: &[&str] = &[
    "ca_file",
    "client_cert",
    "client_key",
    "insecure",
    "server_name",
];
pub const KAFKA_KEYS: &[&str] = &["bootstrap", "acks", "settings"];
pub const SERVER_KEYS: &[&str] = &["tier", "agent", "processes", "cores", "token_file"];
pub const CAPACITY_KEYS: &[&str] = &[
    "epsilon",
    "rho_min",
    "tolerance",
    "k_ovld",
    "think_gap",
    "min_duration",
    "max_duration",
    "window",
    "demand_epsilon",
    "p_max",
    "s_low",
    "levels_beyond",
    "search",
    "min_achieved",
    "rate_precision",
    "rate_factor",
    "max_error_rate",
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
    let decoded =
        requests_node.map(|n| decode_requests(&mut ctx, n, &feeders, target_kind, base_dir));
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

    let session = if names.is_empty() {
        None
    } else {
        decode_session(&mut ctx, top.get("session"), &top, &request_keys)
    };
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
            let Some(text) = ctx.string(item, "a threshold like `p99 < 250ms`") else {
                continue;
            };
            let id = |name: &str| {
                names
                    .iter()
                    .position(|n| *n == name)
                    .map(|i| RequestId(i as u32))
            };
            match parse_threshold(&text, id) {
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
        name, target, think_time, session, capacity, arrivals, users, workers,
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
        }),
        _ => Err(ctx.errors),
    }
}

fn decode_target(ctx: &mut Ctx, node: &Node, base_dir: &Path) -> Option<Target> {
    let fields = ctx.map(node, "`target`", TARGET_KEYS)?;
    let endpoint = match (fields.get("base_url"), fields.get("kafka")) {
        (Some(_), Some(_)) => {
            let pos = fields.key("kafka").map_or(fields.pos, |k| k.pos);
            ctx.error_hint(
                pos,
                "expected one of `base_url` (an HTTP server) or `kafka` (a Kafka cluster) in `target`, found both",
                Some("one scenario drives one kind of target".into()),
            );
            None
        }
        (Some(n), None) => ctx
            .setting(n, "a base URL like `http://127.0.0.1:8080`")
            .and_then(|text| {
                parse_base_url(&text)
                    .map_err(|e| ctx.error(n.pos(), e))
                    .ok()
            })
            .map(Endpoint::Http),
        (None, Some(n)) => kafka::decode_kafka(ctx, n, base_dir).map(Endpoint::Kafka),
        (None, None) => {
            ctx.error(
                fields.pos,
                "missing required key `base_url` (or `kafka`) in `target`",
            );
            None
        }
    };
    // What only an HTTP client does, asked of a Kafka target.
    if let Some(Endpoint::Kafka(_)) = &endpoint {
        for key in [
            "tls",
            "cookies",
            "http",
            "compression",
            "streams_per_connection",
        ] {
            if let Some(k) = fields.key(key) {
                ctx.error_hint(
                    k.pos,
                    format!("`{key}` is an HTTP setting; this target is a Kafka cluster"),
                    Some("remove it (Kafka client settings go under `kafka.settings`)".into()),
                );
            }
        }
    }
    let timeout = match fields.get("timeout") {
        Some(n) => ctx.duration(n).filter(|d| {
            if d.is_zero() {
                ctx.error(n.pos(), "expected a timeout above zero, found `0`");
            }
            !d.is_zero()
        }),
        None => Some(Duration::from_secs(10)),
    };
    let tls = match fields.get("tls") {
        Some(n) => {
            let tls = decode_tls(ctx, n, base_dir);
            if let Some(Endpoint::Http(base)) = &endpoint {
                if !base.tls {
                    ctx.error_hint(
                        n.pos(),
                        "`tls` settings for a plain `http://` base URL",
                        Some("write the base URL as `https://…`".into()),
                    );
                }
            }
            tls?
        }
        None => TlsSettings::default(),
    };
    let cookies = match fields.get("cookies") {
        Some(n) => match ctx.string(n, "`session`, `user` or `off`")?.as_str() {
            "session" => CookiePolicy::Session,
            "user" => CookiePolicy::User,
            "off" => CookiePolicy::Off,
            other => {
                ctx.error_hint(
                    n.pos(),
                    format!("expected `session`, `user` or `off` for `cookies`, found `{other}`"),
                    Some("session: each user's cookies go when its session ends (the default); user: kept all level; off: none".into()),
                );
                return None;
            }
        },
        None => CookiePolicy::default(),
    };
    let http = match fields.get("http") {
        Some(n) => match ctx.string(n, "`1.1`, `2` or `auto`")?.as_str() {
            "1.1" => HttpVersion::Http1,
            "2" => HttpVersion::Http2,
            "auto" => HttpVersion::Auto,
            other => {
                ctx.error_hint(
                    n.pos(),
                    format!("expected `1.1`, `2` or `auto` for `http`, found `{other}`"),
                    Some("1.1: HTTP/1.1 (the default); 2: HTTP/2 (h2 over https, h2c over http); auto: what the server offers by ALPN".into()),
                );
                return None;
            }
        },
        None => HttpVersion::default(),
    };
    let streams_per_connection = match fields.get("streams_per_connection") {
        Some(n) => {
            let streams = ctx.integer(n, 1, "a number of streams")?;
            if http == HttpVersion::Http1 {
                ctx.error_hint(
                    n.pos(),
                    "`streams_per_connection` needs HTTP/2",
                    Some("add `http: 2` (or `auto`) to `target`".into()),
                );
                return None;
            }
            u32::try_from(streams).unwrap_or(u32::MAX)
        }
        None => 1,
    };
    let compression = match fields.get("compression") {
        Some(n) => {
            match ctx.string(n, "`true` or `false`")?.as_str() {
                "true" => true,
                "false" => false,
                other => {
                    ctx.error_hint(
                    n.pos(),
                    format!("expected `true` or `false` for `compression`, found `{other}`"),
                    Some("true sends `Accept-Encoding: gzip, deflate, br` and decodes what comes".into()),
                );
                    return None;
                }
            }
        }
        None => false,
    };
    Some(Target {
        endpoint: endpoint?,
        timeout: timeout?,
        tls,
        cookies,
        http,
        compression,
        streams_per_connection,
    })
}

/// What a PEM file must hold.
#[derive(Clone, Copy)]
pub(super) enum Pem {
    Certificate,
    PrivateKey,
}

/// The PEM file named by `n` (relative to the scenario), read now so
/// that a missing or wrong one is reported at its place, and kept.
pub(super) fn pem_file(ctx: &mut Ctx, n: &Node, base_dir: &Path, kind: Pem) -> Option<PemFile> {
    let (marker, what) = match kind {
        Pem::Certificate => ("-----BEGIN CERTIFICATE-----", "certificate"),
        Pem::PrivateKey => ("PRIVATE KEY-----", "private key"),
    };
    let name = ctx.setting(n, "a file path")?;
    let path = base_dir.join(&name);
    let read = files::read_bounded(&path, files::SMALL_FILE_LIMIT, what);
    match read {
        Ok(pem) if String::from_utf8_lossy(&pem).contains(marker) => Some(PemFile { path, pem }),
        Ok(_) => {
            ctx.error(
                n.pos(),
                format!("`{name}` holds no {what} (expected PEM text with `{marker}`)"),
            );
            None
        }
        Err(e) => {
            ctx.error(n.pos(), e);
            None
        }
    }
}

/// `tls: {ca_file, insecure, server_name, client_cert, client_key}`; files
/// relative to the scenario, read now so a missing one is reported here.
fn decode_tls(ctx: &mut Ctx, node: &Node, base_dir: &Path) -> Option<TlsSettings> {
    let fields = ctx.map(node, "`tls`", TLS_KEYS)?;
    let mut ok = true;
    let mut pem = |ctx: &mut Ctx, key: &str, kind: Pem| {
        let path = pem_file(ctx, fields.get(key)?, base_dir, kind);
        ok &= path.is_some();
        path
    };
    let ca_file = pem(ctx, "ca_file", Pem::Certificate);
    let client_cert = pem(ctx, "client_cert", Pem::Certificate);
    let client_key = pem(ctx, "client_key", Pem::PrivateKey);
    let insecure = match fields.get("insecure") {
        Some(n) => match n {
            Node::Scalar { value, .. } if value == "true" => true,
            Node::Scalar { value, .. } if value == "false" => false,
            other => {
                ctx.error(other.pos(), "expected `true` or `false` for `insecure`");
                return None;
            }
        },
        None => false,
    };
    let server_name = fields
        .get("server_name")
        .and_then(|n| ctx.setting(n, "a host name"));
    if client_cert.is_some() != client_key.is_some() {
        ctx.error(
            fields.pos,
            "`client_cert` and `client_key` go together: give both, or neither",
        );
        return None;
    }
    ok.then_some(TlsSettings {
        ca_file,
        insecure,
        server_name,
        client_cert,
        client_key,
        skip_hostname: false,
    })
}

pub(super) fn decode_think_time(ctx: &mut Ctx, node: &Node) -> Option<ThinkTime> {
    if let Node::Scalar { .. } = node {
        return ctx.duration(node).map(ThinkTime::Constant);
    }
    let Node::Map { entries, pos } = node else {
        ctx.error(
            node.pos(),
            format!("expected a duration or one of {{constant: D}}, {{exponential: D}}, {{uniform: [D, D]}}, {{lognormal: {{mean: D, cv: X}}}}, found {}", node.describe()),
        );
        return None;
    };
    let kinds = ["constant", "exponential", "uniform", "lognormal"];
    let errors_before = ctx.errors.len();
    ctx.map(node, "`think_time`", &kinds)?;
    if ctx.errors.len() > errors_before {
        return None;
    }
    if entries.len() != 1 {
        ctx.error(
            *pos,
            format!("expected exactly one of `constant`, `exponential`, `uniform` or `lognormal` in `think_time`, found {} keys", entries.len()),
        );
        return None;
    }
    let (key, value) = &entries[0];
    match key.name.as_str() {
        "constant" => ctx.duration(value).map(ThinkTime::Constant),
        "exponential" => ctx
            .duration(value)
            .map(|mean| ThinkTime::Exponential { mean }),
        "lognormal" => decode_lognormal(ctx, value),
        _ => {
            let items = match value {
                Node::Seq { items, .. } if items.len() == 2 => items,
                _ => {
                    ctx.error(
                        value.pos(),
                        format!(
                            "expected `[min, max]` durations, found {}",
                            value.describe()
                        ),
                    );
                    return None;
                }
            };
            let (min, max) = (ctx.duration(&items[0]), ctx.duration(&items[1]));
            let (min, max) = (min?, max?);
            if min > max {
                ctx.error(
                    value.pos(),
                    format!(
                        "expected `[min, max]` with min <= max, found min {min:?} > max {max:?}"
                    ),
                );
                return None;
            }
            Some(ThinkTime::Uniform { min, max })
        }
    }
}

/// `{lognormal: {mean: 20s, cv: 1.5}}`: the mean pause and its coefficient
/// of variation (standard deviation over mean).
fn decode_lognormal(ctx: &mut Ctx, node: &Node) -> Option<ThinkTime> {
    let fields = ctx.map(node, "`lognormal`", &["mean", "cv"])?;
    let mean = fields.required(ctx, "mean").and_then(|n| ctx.duration(n));
    let cv = fields.required(ctx, "cv").and_then(|n| {
        match n.as_str().and_then(|s| s.trim().parse::<f64>().ok()) {
            Some(cv) if cv > 0.0 && cv <= 100.0 => Some(cv),
            _ => {
                ctx.error_hint(
                    n.pos(),
                    format!("expected a coefficient of variation above 0 (at most 100), found {}", n.describe()),
                    Some("cv is the standard deviation over the mean: 1 is as spread as an exponential".into()),
                );
                None
            }
        }
    });
    Some(ThinkTime::LogNormal {
        mean: mean?,
        cv: cv?,
    })
}

/// `servers:`; token files relative to the scenario, read now.
fn decode_servers(ctx: &mut Ctx, node: &Node, base_dir: &Path) -> Vec<ServerSpec> {
    let mut servers: Vec<ServerSpec> = Vec::new();
    for item in ctx.seq(node, "`servers`").unwrap_or_default() {
        let Some(fields) = ctx.map(item, "a `servers` entry", SERVER_KEYS) else {
            continue;
        };
        let tier = fields.required(ctx, "tier").and_then(|n| {
            let tier = ctx.string(n, "a tier name like `web`")?;
            if servers.iter().any(|s| s.tier == tier) {
                ctx.error(n.pos(), format!("duplicate tier `{tier}` in `servers`"));
            }
            Some(tier)
        });
        let agent = fields.required(ctx, "agent").and_then(|n| {
            let agent = ctx.setting(n, "an agent URL like `http://127.0.0.1:9870`")?;
            if let Err(e) = url::parse_plain_base_url(&agent) {
                ctx.error(n.pos(), e.replace("a base URL", "an agent URL"));
                return None;
            }
            Some(agent)
        });
        let processes = fields.required(ctx, "processes").and_then(|n| {
            let items = ctx.seq(n, "`processes`")?;
            if items.is_empty() {
                ctx.error(
                    n.pos(),
                    "expected at least one process name in `processes`, found none",
                );
            }
            let names: Vec<String> = items
                .iter()
                .filter_map(|p| {
                    let name = ctx.string(p, "a process name")?;
                    // What the agent answers for: refused here, not mid-run.
                    let max = autoperf_agent::api::MAX_NAME_BYTES;
                    if name.len() > max || name.chars().any(char::is_control) {
                        ctx.error(
                            p.pos(),
                            format!(
                                "expected a process name of 1 to {max} printable bytes, found {}",
                                p.describe()
                            ),
                        );
                        return None;
                    }
                    Some(name)
                })
                .collect();
            (names.len() == items.len() && !names.is_empty()).then_some(names)
        });
        let cores = fields
            .get("cores")
            .map(|n| ctx.integer(n, 1, "a positive number of cores"));
        let token = match fields.get("token_file") {
            None => Some(None),
            // On a worker: the controller samples the agents, and their
            // token is not shipped to workers with the job.
            Some(_) if super::sources::for_worker() => Some(None),
            Some(n) => ctx.setting(n, "a token file path").and_then(|name| {
                let path = base_dir.join(&name);
                let read = files::read_bounded(&path, files::SMALL_FILE_LIMIT, "token file")
                    .and_then(|b| {
                        let text = String::from_utf8_lossy(&b);
                        autoperf_agent::options::token_from_text(&text, &path)
                            .map_err(|e| e.to_string())
                    });
                match read {
                    Ok(token) => Some(Some(token)),
                    Err(e) => {
                        ctx.error(n.pos(), e);
                        None
                    }
                }
            }),
        };
        if let (Some(tier), Some(agent), Some(processes), Some(token)) =
            (tier, agent, processes, token)
        {
            servers.push(ServerSpec {
                tier,
                agent,
                processes,
                cores: cores.flatten().map(|c| c.min(u32::MAX as u64) as u32),
                token,
            });
        }
    }
    // The agent answers for at most MAX_NAMES names per request, and the
    // controller asks each agent about all its tiers' names at once.
    let max = autoperf_agent::api::MAX_NAMES;
    let mut per_agent: Vec<(&str, std::collections::BTreeSet<&str>)> = Vec::new();
    for s in &servers {
        let i = match per_agent.iter().position(|(a, _)| *a == s.agent) {
            Some(i) => i,
            None => {
                per_agent.push((&s.agent, Default::default()));
                per_agent.len() - 1
            }
        };
        per_agent[i]
            .1
            .extend(s.processes.iter().map(String::as_str));
    }
    if let Some((agent, names)) = per_agent.iter().find(|(_, n)| n.len() > max) {
        ctx.error(
            node.pos(),
            format!(
                "the agent at {agent} is asked about {} process names; it answers for at most {max} (group them under fewer names)",
                names.len()
            ),
        );
    }
    servers
}

fn decode_capacity(ctx: &mut Ctx, node: &Node) -> Option<CapacitySettings> {
    let fields = ctx.map(node, "`capacity`", CAPACITY_KEYS)?;
    let mut c = CapacitySettings::default();
    let errors_before = ctx.errors.len();
    for (key, value) in fields.entries {
        if value.is_null() {
            continue;
        }
        let count = |ctx: &mut Ctx, min| {
            ctx.integer(
                value,
                min,
                if min == 0 {
                    "a whole number"
                } else {
                    "a positive whole number"
                },
            )
            .map(|n| n.min(u32::MAX as u64) as u32)
        };
        match key.name.as_str() {
            "epsilon" => c.epsilon = ctx.fraction(value, "a fraction").unwrap_or(c.epsilon),
            "rho_min" => c.rho_min = ctx.fraction(value, "a fraction").unwrap_or(c.rho_min),
            "tolerance" => c.tolerance = ctx.fraction(value, "a fraction").unwrap_or(c.tolerance),
            "think_gap" => c.think_gap = ctx.fraction(value, "a fraction").unwrap_or(c.think_gap),
            "max_error_rate" => match ctx.fraction(value, "a fraction") {
                Some(f) if f > 0.0 => c.max_error_rate = f,
                Some(_) => ctx.error(
                    value.pos(),
                    "expected an error rate above 0 (like `50%`): at 0 one failed request would void a level",
                ),
                None => {}
            },
            "min_achieved" => match ctx.fraction(value, "a fraction") {
                Some(f) if f > 0.0 => c.min_achieved = f,
                Some(_) => ctx.error(value.pos(), "expected a fraction above 0, like `95%`, found 0"),
                None => {}
            },
            "rate_precision" => match ctx.fraction(value, "a fraction") {
                Some(f) if f > 0.0 && f < 1.0 => c.rate_precision = f,
                Some(_) => ctx.error(
                    value.pos(),
                    format!("expected a precision between 0 and 100% (like `2%`), found {}", value.describe()),
                ),
                None => {}
            },
            "rate_factor" => match value.as_str().and_then(|t| t.trim().parse::<f64>().ok()) {
                Some(f) if f > 1.0 && f <= 100.0 => c.rate_factor = f,
                _ => ctx.error(
                    value.pos(),
                    format!("expected the ramp's factor, a number above 1 and at most 100 (like `2`), found {}", value.describe()),
                ),
            },
            "demand_epsilon" => {
                // In percent, like the paper: `5` and `5%` both mean 5 %.
                let text = value.as_str().unwrap_or("");
                match text.trim_end_matches('%').trim().parse::<f64>() {
                    Ok(v) if v > 0.0 && v <= 100.0 => c.demand_epsilon = v,
                    _ => ctx.error(
                        value.pos(),
                        format!(
                            "expected a percentage like `5%`, found {}",
                            value.describe()
                        ),
                    ),
                }
            }
            "k_ovld" => c.k_ovld = count(ctx, 1).unwrap_or(c.k_ovld),
            "p_max" => c.p_max = count(ctx, 1).unwrap_or(c.p_max),
            "levels_beyond" => c.levels_beyond = count(ctx, 0).unwrap_or(c.levels_beyond),
            "min_duration" => c.min_duration = ctx.duration(value).unwrap_or(c.min_duration),
            "max_duration" => c.max_duration = ctx.duration(value).unwrap_or(c.max_duration),
            "window" => c.window = ctx.duration(value).unwrap_or(c.window),
            "s_low" => c.s_low = ctx.duration(value).unwrap_or(c.s_low),
            "search" => match value.as_str().and_then(SearchStrategy::parse) {
                Some(strategy) => c.search = strategy,
                None => ctx.error(
                    value.pos(),
                    format!(
                        "expected `model` or `bisection`, found {}",
                        value.describe()
                    ),
                ),
            },
            _ => {} // reported by `map`
        }
    }
    if c.min_duration > c.max_duration {
        let pos = fields
            .key("min_duration")
            .or(fields.key("max_duration"))
            .map_or(fields.pos, |k| k.pos);
        ctx.error(
            pos,
            format!(
                "expected `min_duration` <= `max_duration`, found {:?} > {:?}",
                c.min_duration, c.max_duration
            ),
        );
    }
    (ctx.errors.len() == errors_before).then_some(c)
}
