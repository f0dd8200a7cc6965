//! `servers`: the process groups (tiers) whose service demands the
//! capacity analysis measures, each with the agent that reports on it and
//! the token file that agent wants.

use std::path::Path;

use super::super::files;
use super::super::model::{Selector, ServerSpec};
use super::super::yaml::Node;
use super::ctx::Ctx;
use super::url::parse_plain_base_url;

pub const SERVER_KEYS: &[&str] = &[
    "tier",
    "agent",
    "processes",
    "cgroup",
    "cores",
    "token_file",
];

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
        let agent = fields.required(ctx, "agent").and_then(|n| {
            let agent = ctx.setting(n, "an agent URL like `http://127.0.0.1:9870`")?;
            if let Err(e) = parse_plain_base_url(&agent) {
                ctx.error(n.pos(), e.replace("a base URL", "an agent URL"));
                return None;
            }
            Some(agent)
        });
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
        let (processes, by) = match (fields.get("processes"), fields.get("cgroup")) {
            (Some(n), None) => (by_processes(ctx, n), Selector::Processes),
            (None, Some(n)) => (by_cgroup(ctx, n), Selector::Cgroup),
            (Some(_), Some(n)) => {
                ctx.error_hint(
                    n.pos(),
                    "expected one of `processes` and `cgroup` in a `servers` entry, found both",
                    Some("a tier is either process names or a cgroup glob".into()),
                );
                (None, Selector::Processes)
            }
            (None, None) => {
                ctx.error_hint(
                    fields.pos,
                    "missing required key `processes` (or `cgroup`) in a `servers` entry",
                    Some("`processes: [nginx]` by process name, or `cgroup: \"system.slice/web-*.scope\"` for a container's cgroups".into()),
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
        if let (Some(tier), Some(agent), Some(processes), Some(token)) =
            (tier, agent, processes, token)
        {
            servers.push(ServerSpec {
                tier,
                agent,
                processes,
                by,
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
