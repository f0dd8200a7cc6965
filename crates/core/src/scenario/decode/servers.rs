//! `servers`: the process groups (tiers) whose service demands the
//! capacity analysis measures, each with the agent that reports on it and
//! the token file that agent wants.

use std::path::Path;

use super::super::files;
use super::super::model::{PrometheusQueries, Selector, ServerSpec};
use super::super::yaml::Node;
use super::ctx::Ctx;
use super::url::{parse_base_url, parse_plain_base_url};

pub(crate) const SERVER_KEYS: &[&str] = &[
    "tier",
    "agent",
    "processes",
    "cgroup",
    "cores",
    "token_file",
    "prometheus",
];

/// The keys of `servers[].prometheus`.
pub(crate) const PROMETHEUS_KEYS: &[&str] =
    &["url", "cpu", "memory", "token", "username", "password"];

/// `servers:`; token files relative to the scenario, read now.
pub(super) fn decode_servers(ctx: &mut Ctx, node: &Node, base_dir: &Path) -> Vec<ServerSpec> {
    let mut servers: Vec<ServerSpec> = Vec::new();
    for item in ctx.seq(node, "`servers`").unwrap_or_default() {
        let Some(fields) = ctx.map(item, "a `servers` entry", SERVER_KEYS) else {
            continue;
        };
        let tier = fields.required(ctx, "tier").and_then(|n| {
            let tier = ctx.string(n, "a tier name like `web`")?;
            // Thresholds (`web.cpu_ms < 5`) and server_series.csv name it.
            let named = !tier.is_empty()
                && tier
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !named {
                ctx.error_hint(
                    n.pos(),
                    format!("a tier name is letters, digits, `_` and `-`, found `{tier}`"),
                    Some("thresholds name it: `web.cpu_ms < 5`".into()),
                );
                return None;
            }
            if servers.iter().any(|s| s.tier == tier) {
                ctx.error(n.pos(), format!("duplicate tier `{tier}` in `servers`"));
            }
            Some(tier)
        });
        let prometheus = fields.get("prometheus").map(|n| decode_prometheus(ctx, n));
        let agent = match (&prometheus, fields.get("agent")) {
            (Some(_), Some(n)) => {
                ctx.error_hint(
                    n.pos(),
                    "expected one of `agent` and `prometheus` in a `servers` entry, found both",
                    Some("a tier is measured either by an agent or through Prometheus".into()),
                );
                None
            }
            (Some(p), None) => p.as_ref().map(|(text, _)| text.clone()),
            (None, _) => fields.required(ctx, "agent").and_then(|n| {
                let agent = ctx.setting(n, "an agent URL like `http://127.0.0.1:9870`")?;
                if let Err(e) = parse_plain_base_url(&agent) {
                    ctx.error(n.pos(), e.replace("a base URL", "an agent URL"));
                    return None;
                }
                Some(agent)
            }),
        };
        let by_processes = |ctx: &mut Ctx, n: &Node| {
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
        };
        // A cgroup glob instead of process names: a container, a pod, a
        // unit and its replicas (`system.slice/web-*.scope`).
        let by_cgroup = |ctx: &mut Ctx, n: &Node| {
            let glob = ctx.string(n, "a cgroup glob like `system.slice/web-*.scope`")?;
            let max = autoperf_agent::api::MAX_GLOB_BYTES;
            let fit = !glob.is_empty() && glob.len() <= max && !glob.chars().any(char::is_control);
            let checked = autoperf_agent::cgroups::check_glob(&glob);
            match (fit, checked) {
                (true, Ok(())) => Some(vec![glob.trim_matches('/').to_string()]),
                (false, _) => {
                    ctx.error(
                        n.pos(),
                        format!(
                            "expected a cgroup glob of 1 to {max} printable bytes, found {}",
                            n.describe()
                        ),
                    );
                    None
                }
                (_, Err(why)) => {
                    ctx.error_hint(
                        n.pos(),
                        format!("`{glob}`: {why}"),
                        Some(
                            "write it relative to the hierarchy's root, like `kubepods.slice/*/*`"
                                .into(),
                        ),
                    );
                    None
                }
            }
        };
        let selectors: Vec<(&str, &Node)> = ["processes", "cgroup"]
            .into_iter()
            .filter_map(|key| Some((key, fields.get(key)?)))
            .collect();
        let (processes, by) = match (selectors.as_slice(), &prometheus, &tier) {
            ([("processes", n)], None, _) => (by_processes(ctx, n), Selector::Processes),
            ([(_, n)], None, _) => (by_cgroup(ctx, n), Selector::Cgroup),
            // Its figures go by the tier's name, as a process group's by
            // its name.
            ([], Some(_), Some(tier)) => (Some(vec![tier.clone()]), Selector::Prometheus),
            ([], Some(_), None) => (None, Selector::Prometheus),
            ([(key, n)], Some(_), _) => {
                ctx.error_hint(
                    n.pos(),
                    format!("`{key}` in a `servers` entry measured through `prometheus`"),
                    Some("Prometheus's queries select what is measured: leave `processes` and `cgroup` out".into()),
                );
                (None, Selector::Prometheus)
            }
            ([_, (_, n)], ..) => {
                ctx.error_hint(
                    n.pos(),
                    "expected one of `processes` and `cgroup` in a `servers` entry, found both",
                    Some("a tier is either process names or a cgroup glob".into()),
                );
                (None, Selector::Processes)
            }
            _ => {
                ctx.error_hint(
                    fields.pos,
                    "missing required key `processes` (or `cgroup`, or `prometheus`) in a `servers` entry",
                    Some("`processes: [nginx]` by process name, `cgroup: \"system.slice/web-*.scope\"` for a container's cgroups, or `prometheus: {url: …, cpu: …}`".into()),
                );
                (None, Selector::Processes)
            }
        };
        let cores = fields
            .get("cores")
            .map(|n| ctx.integer(n, 1, "a positive number of cores"));
        let token = match fields.get("token_file") {
            None => Some(None),
            // On a worker: the controller samples the agents, and their
            // token is not shipped to workers with the job.
            Some(_) if super::super::sources::for_worker() => Some(None),
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
        let cores = cores.flatten().map(|c| c.min(u32::MAX as u64) as u32);
        // Prometheus says what a tier used, not what it may use.
        if prometheus.is_some() && cores.is_none() {
            ctx.error_hint(
                fields.pos,
                "missing required key `cores` in a `servers` entry measured through `prometheus`",
                Some("the cores the tier's processes may use together (its replicas' CPU limits summed), which Prometheus does not say: `cores: 2`".into()),
            );
        }
        let prometheus = match prometheus {
            None => Some(None),
            Some(Some((_, mut queries))) => {
                if let Some(Some(token)) = &token {
                    queries
                        .authorization
                        .get_or_insert(format!("Bearer {token}"));
                }
                Some(Some(queries))
            }
            Some(None) => None,
        };
        if let (Some(tier), Some(agent), Some(processes), Some(token), Some(prometheus)) =
            (tier, agent, processes, token, prometheus)
        {
            servers.push(ServerSpec {
                tier,
                agent,
                processes,
                by,
                cores,
                token,
                prometheus,
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

/// `prometheus: {url, cpu, memory, token | username + password}`: the URL
/// as written and the queries.
fn decode_prometheus(ctx: &mut Ctx, node: &Node) -> Option<(String, PrometheusQueries)> {
    let fields = ctx.map(node, "`prometheus`", PROMETHEUS_KEYS)?;
    let url = fields.required(ctx, "url").and_then(|n| {
        let text = ctx.setting(n, "Prometheus's URL like `http://127.0.0.1:9090`")?;
        match parse_base_url(&text) {
            Ok(url) => Some((text, url)),
            Err(e) => {
                ctx.error(n.pos(), e.replace("a base URL", "Prometheus's URL"));
                None
            }
        }
    });
    let query = |ctx: &mut Ctx, key: &str, what: &str| {
        let n = fields.get(key)?;
        let text = ctx.setting(n, what)?;
        if text.trim().is_empty() {
            ctx.error(n.pos(), format!("expected {what}, found an empty query"));
            return None;
        }
        Some(text)
    };
    let cpu = query(
        ctx,
        "cpu",
        "a PromQL counter of CPU seconds like `sum(process_cpu_seconds_total{job=\"web\"})`",
    );
    if fields.get("cpu").is_none() {
        fields.required(ctx, "cpu");
    }
    let memory = query(
        ctx,
        "memory",
        "a PromQL gauge of bytes like `sum(process_resident_memory_bytes{job=\"web\"})`",
    );
    let mut secret = |key: &str| {
        let n = fields.get(key)?;
        ctx.setting(
            n,
            &format!("a `{key}` (`${{env.NAME}}` keeps it out of the file)"),
        )
    };
    let (token, username, password) = (secret("token"), secret("username"), secret("password"));
    let authorization = match (token, username, password) {
        (Some(token), None, None) => Some(format!("Bearer {token}")),
        (None, Some(user), Some(password)) => {
            use base64::Engine;
            let pair =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            Some(format!("Basic {pair}"))
        }
        (None, None, None) => None,
        _ => {
            ctx.error_hint(
                fields.pos,
                "expected either `token` or both `username` and `password` in `prometheus`",
                Some("a bearer token, or basic auth's user and password".into()),
            );
            None
        }
    };
    let ((text, url), cpu) = (url?, cpu?);
    Some((
        text,
        PrometheusQueries {
            url,
            cpu,
            memory,
            authorization,
        },
    ))
}
