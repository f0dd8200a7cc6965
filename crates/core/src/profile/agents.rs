//! The controller's side of the profiler agents: which agent to ask about
//! which process names (from the scenario's `servers:`), and one HTTP GET of
//! `/v1/counters` over a kept-alive connection.

use std::collections::BTreeSet;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

pub(crate) use autoperf_agent::Counters;

use super::prometheus::{unix_now, Client, QueryError, Tiers};
use crate::protocol::http1;
use crate::protocol::side::percent_encode;
use crate::scenario::{PrometheusQueries, Scenario, Selector, ServerSpec};

/// How long one counters request may take before the agent counts as gone.
const AGENT_TIMEOUT: Duration = Duration::from_secs(2);

/// One agent and every process name any tier asks it about, or one
/// Prometheus server and every tier read through it.
#[derive(Debug, Clone)]
pub struct AgentEndpoint {
    /// As written in the scenario, for messages.
    pub url: String,
    pub processes: Vec<String>,
    /// Cgroup globs (`servers[].cgroup`) and their tiers, answered beside
    /// the processes.
    pub cgroups: Vec<(String, String)>,
    /// The tiers served by this agent, for messages.
    pub tiers: Vec<String>,
    source: Source,
}

#[derive(Debug, Clone)]
enum Source {
    Agent {
        addr: SocketAddr,
        /// The bearer token of the first tier that gives one.
        token: Option<String>,
        request: Vec<u8>,
    },
    Prometheus(Tiers),
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The `agent:` URL is not `http://host:port`.
    #[error("tier `{tier}`: agent URL `{url}` is not of the form http://host:port")]
    BadUrl { tier: String, url: String },
    /// No answer from an agent when the run starts.
    #[error("tier {tiers}: no profiler agent answers at {url} ({reason}); start one with `autoperf agent --listen {listen}` on that host, or pass --no-agents")]
    Unreachable {
        tiers: String,
        url: String,
        listen: String,
        reason: String,
    },
    /// An agent answered, but not with counters (a token missing or
    /// wrong, a name it refuses).
    #[error("tier {tiers}: the profiler agent at {url} refused: {reason}")]
    Refused {
        tiers: String,
        url: String,
        reason: String,
    },
    #[error("tier {tier}: no cgroup matches `{glob}` on the host of the agent at {url}{}", nearest_text(.nearest))]
    NoCgroup {
        tier: String,
        glob: String,
        url: String,
        nearest: Vec<String>,
    },
    /// A tier's Prometheus query cannot be read when the run starts.
    #[error("tier {tier}: Prometheus at {url}: query `{query}`: {reason}")]
    Prometheus {
        tier: String,
        url: String,
        query: String,
        reason: QueryError,
    },
    /// A PromQL threshold's query cannot be read when the run starts.
    #[error("threshold on PromQL: Prometheus at {url}: query `{query}`: {reason}")]
    Promql {
        url: String,
        query: String,
        reason: QueryError,
    },
    /// A `prometheus:` URL over TLS whose client cannot be set up.
    #[error("tier {tier}: Prometheus at {url}: {reason}")]
    PrometheusTls {
        tier: String,
        url: String,
        reason: String,
    },
    /// A consumer group a lag threshold names cannot be read when the run
    /// starts.
    #[error("threshold on consumer lag: group `{group}` at {bootstrap}: {reason}; start the application under test (its consumers must have committed offsets) or fix the group's name in the threshold")]
    KafkaLag {
        group: String,
        bootstrap: String,
        reason: String,
    },
}

/// `; there are: a, b` (the cgroups nearest an unmatched glob), or how to
/// list them.
fn nearest_text(nearest: &[String]) -> String {
    if nearest.is_empty() {
        "; list the host's with `systemd-cgls` or `ls /sys/fs/cgroup`".into()
    } else {
        format!("; nearest there: {}", nearest.join(", "))
    }
}

/// All agents of a scenario.
#[derive(Debug, Clone, Default)]
pub struct AgentSet {
    pub agents: Vec<AgentEndpoint>,
}

impl AgentSet {
    pub fn from_scenario(scenario: &Scenario) -> Result<AgentSet, AgentError> {
        let mut agents: Vec<AgentEndpoint> = Vec::new();
        for server in &scenario.servers {
            if let Some(queries) = &server.prometheus {
                add_prometheus_tier(&mut agents, server, queries)?;
                continue;
            }
            let addr = parse_agent_url(&server.agent).ok_or_else(|| AgentError::BadUrl {
                tier: server.tier.clone(),
                url: server.agent.clone(),
            })?;
            let at = agents
                .iter()
                .position(|a| matches!(a.source, Source::Agent { addr: at, .. } if at == addr));
            let agent = match at {
                Some(i) => &mut agents[i],
                None => {
                    agents.push(AgentEndpoint {
                        url: server.agent.clone(),
                        processes: Vec::new(),
                        cgroups: Vec::new(),
                        tiers: Vec::new(),
                        source: Source::Agent {
                            addr,
                            token: None,
                            request: Vec::new(),
                        },
                    });
                    agents.last_mut().expect("just pushed")
                }
            };
            agent.tiers.push(server.tier.clone());
            if let Source::Agent {
                token: t @ None, ..
            } = &mut agent.source
            {
                *t = server.token.clone();
            }
            match server.by {
                Selector::Processes | Selector::Prometheus => {
                    agent.processes.extend(server.processes.iter().cloned())
                }
                Selector::Cgroup => agent.cgroups.extend(
                    server
                        .processes
                        .iter()
                        .map(|glob| (glob.clone(), server.tier.clone())),
                ),
            }
        }
        for agent in &mut agents {
            let Source::Agent {
                addr,
                token,
                request,
            } = &mut agent.source
            else {
                continue;
            };
            let names: BTreeSet<&String> = agent.processes.iter().collect();
            let globs: BTreeSet<&String> = agent.cgroups.iter().map(|(glob, _)| glob).collect();
            let query: Vec<String> = names
                .iter()
                .map(|n| format!("process={}", percent_encode(n)))
                .chain(
                    globs
                        .iter()
                        .map(|g| format!("cgroup={}", percent_encode(g))),
                )
                .collect();
            let auth = token
                .as_ref()
                .map(|t| format!("Authorization: Bearer {t}\r\n"))
                .unwrap_or_default();
            *request = format!(
                "GET /v1/counters?{} HTTP/1.1\r\nHost: {}\r\nUser-Agent: autoperf\r\n{auth}\r\n",
                query.join("&"),
                addr
            )
            .into_bytes();
        }
        Ok(AgentSet { agents })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    /// Index of the agent serving `tier`.
    pub(crate) fn agent_of(&self, tier: &str) -> Option<usize> {
        self.agents
            .iter()
            .position(|a| a.tiers.iter().any(|t| t == tier))
    }

    /// Asks every agent (and every Prometheus query) once; the first that
    /// does not answer is an error. Returns each one's first reading, in
    /// order.
    pub fn check_all(&self) -> Result<Vec<Counters>, AgentError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| self.unreachable(0, e.to_string()))?;
        runtime.block_on(async {
            let mut first = Vec::with_capacity(self.agents.len());
            for (i, agent) in self.agents.iter().enumerate() {
                let mut conn = None;
                if let Source::Prometheus(p) = &agent.source {
                    let c =
                        p.counters(&mut conn, unix_now())
                            .await
                            .map_err(|(query, reason)| AgentError::Prometheus {
                                tier: p.tier_of(&query).to_string(),
                                url: agent.url.clone(),
                                query,
                                reason,
                            })?;
                    first.push(c);
                    continue;
                }
                match agent.fetch(&mut conn).await {
                    Ok(c) => {
                        // A glob that selects nothing measures nothing.
                        for (glob, tier) in &agent.cgroups {
                            if let Some(nearest) = c.unmatched_cgroups.get(glob) {
                                return Err(AgentError::NoCgroup {
                                    tier: tier.clone(),
                                    glob: glob.clone(),
                                    url: agent.url.clone(),
                                    nearest: nearest.clone(),
                                });
                            }
                        }
                        first.push(c);
                    }
                    Err(reason) => return Err(self.unreachable(i, reason)),
                }
            }
            Ok(first)
        })
    }

    /// For each tier selected by cgroup whose cgroups lack a controller on
    /// their host (in `first`, `check_all`'s readings), what goes
    /// unmeasured and how to have it: the run measures the rest.
    pub(crate) fn missing_controllers(&self, first: &[Counters]) -> Vec<String> {
        let mut said = Vec::new();
        for (agent, c) in self.agents.iter().zip(first) {
            for (glob, tier) in &agent.cgroups {
                let Some(missing) = c.processes.get(glob).map(|g| &g.missing) else {
                    continue;
                };
                if missing.is_empty() {
                    continue;
                }
                let figures: Vec<&str> = missing
                    .iter()
                    .map(|m| match m.as_str() {
                        "memory" => "its memory (it reads 0)",
                        "io" => "its storage bytes",
                        _ => "some figures",
                    })
                    .collect();
                // v1 calls the io controller blkio.
                let v1: Vec<&str> = missing
                    .iter()
                    .map(|m| if m == "io" { "blkio" } else { m.as_str() })
                    .collect();
                said.push(format!(
                    "tier {tier}: the cgroups of `{glob}` have no {} controller on the host of the {}, so {} not measured; its CPU is. Mount the cgroup v1 {} hierarchy there, or enable the controller in the parent cgroup's cgroup.subtree_control (v2: echo +{} > PARENT/cgroup.subtree_control) before the service starts",
                    missing.join(" nor "),
                    agent.describe(),
                    match figures.as_slice() {
                        [one] => format!("{one} is"),
                        many => format!("{} are", many.join(" and ")),
                    },
                    v1.join(" and "),
                    missing.join(" +"),
                ));
            }
        }
        said
    }

    fn unreachable(&self, i: usize, reason: String) -> AgentError {
        let agent = &self.agents[i.min(self.agents.len().saturating_sub(1))];
        let listen = match &agent.source {
            Source::Agent { addr, .. } => addr.to_string(),
            Source::Prometheus(_) => String::new(),
        };
        if reason.starts_with("HTTP ") {
            return AgentError::Refused {
                tiers: agent.tiers.join(", "),
                url: agent.url.clone(),
                reason,
            };
        }
        AgentError::Unreachable {
            tiers: agent.tiers.join(", "),
            url: agent.url.clone(),
            listen,
            reason,
        }
    }
}

impl AgentEndpoint {
    /// What answers here, for messages: `profiler agent at URL` or
    /// `Prometheus at URL`.
    pub(crate) fn describe(&self) -> String {
        match self.source {
            Source::Agent { .. } => format!("profiler agent at {}", self.url),
            Source::Prometheus(_) => format!("Prometheus at {}", self.url),
        }
    }

    /// Whether this reads Prometheus, not an agent.
    pub(crate) fn is_prometheus(&self) -> bool {
        matches!(self.source, Source::Prometheus(_))
    }

    /// One counters reading, reusing `conn` when the agent kept it open.
    pub(crate) async fn fetch(
        &self,
        conn: &mut Option<http1::Connection>,
    ) -> Result<Counters, String> {
        let (addr, token, request) = match &self.source {
            Source::Agent {
                addr,
                token,
                request,
            } => (*addr, token, request),
            Source::Prometheus(p) => {
                return p
                    .counters(conn, unix_now())
                    .await
                    .map_err(|(query, why)| format!("query `{query}`: {why}"))
            }
        };
        let attempt = async {
            if conn.is_none() {
                *conn = Some(
                    http1::connect(addr, None)
                        .await
                        .map_err(|k| k.name().replace('_', " "))?,
                );
            }
            let c = conn.as_mut().expect("just connected");
            let mut response = crate::protocol::Response::default();
            let reply = c
                .exchange(request, false, Some(&mut response), &mut Vec::new())
                .await
                .map_err(|f| f.kind.name().replace('_', " "))?;
            let body = response.body;
            if reply.close {
                *conn = None;
            }
            if reply.status == 401 {
                return Err(if token.is_some() {
                    "HTTP 401: it refused the token of `token_file:`; give the file the agent \
                     was started with"
                        .to_string()
                } else {
                    "HTTP 401: it requires a token; give `token_file:` (the file the agent \
                     was started with) in this tier's `servers:` entry"
                        .to_string()
                });
            }
            if reply.status != 200 {
                return Err(format!(
                    "HTTP {}: {}",
                    reply.status,
                    String::from_utf8_lossy(&body).trim()
                ));
            }
            let mut counters = serde_json::from_slice::<Counters>(&body)
                .map_err(|e| format!("unexpected answer ({e}); is it an autoperf agent?"))?;
            // A cgroup group goes by its glob, as a process group by its
            // name (the scenario keeps names and globs apart).
            let cgroups = std::mem::take(&mut counters.cgroups);
            counters.processes.extend(cgroups);
            Ok(counters)
        };
        match tokio::time::timeout(AGENT_TIMEOUT, attempt).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(e)) => {
                *conn = None;
                Err(e)
            }
            Err(_) => {
                *conn = None;
                Err(format!("no answer within {AGENT_TIMEOUT:?}"))
            }
        }
    }
}

/// Adds a tier read through Prometheus: to the endpoint of its URL (and
/// credentials), or a new one.
fn add_prometheus_tier(
    agents: &mut Vec<AgentEndpoint>,
    server: &ServerSpec,
    queries: &PrometheusQueries,
) -> Result<(), AgentError> {
    let same = |a: &AgentEndpoint| match &a.source {
        Source::Prometheus(p) => {
            a.url == server.agent && p.tiers[0].1.authorization == queries.authorization
        }
        Source::Agent { .. } => false,
    };
    let i = match agents.iter().position(same) {
        Some(i) => i,
        None => {
            let client =
                Client::new(&queries.url, queries.authorization.clone()).map_err(|reason| {
                    AgentError::PrometheusTls {
                        tier: server.tier.clone(),
                        url: server.agent.clone(),
                        reason,
                    }
                })?;
            agents.push(AgentEndpoint {
                url: server.agent.clone(),
                processes: Vec::new(),
                cgroups: Vec::new(),
                tiers: Vec::new(),
                source: Source::Prometheus(Tiers {
                    client,
                    tiers: Vec::new(),
                }),
            });
            agents.len() - 1
        }
    };
    let endpoint = &mut agents[i];
    endpoint.tiers.push(server.tier.clone());
    endpoint.processes.push(server.tier.clone());
    if let Source::Prometheus(p) = &mut endpoint.source {
        p.tiers.push((
            server.tier.clone(),
            queries.clone(),
            server.cores.unwrap_or(1),
        ));
    }
    Ok(())
}

/// `http://host:port[/]` → a socket address.
fn parse_agent_url(url: &str) -> Option<SocketAddr> {
    let rest = url.strip_prefix("http://")?;
    let authority = rest.trim_end_matches('/');
    if authority.contains('/') {
        return None;
    }
    let with_port = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        && !authority.ends_with(']')
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    with_port.to_socket_addrs().ok()?.next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_urls() {
        assert_eq!(
            parse_agent_url("http://127.0.0.1:9870"),
            Some("127.0.0.1:9870".parse().unwrap())
        );
        assert_eq!(
            parse_agent_url("http://127.0.0.1:9870/"),
            Some("127.0.0.1:9870".parse().unwrap())
        );
        assert_eq!(
            parse_agent_url("http://[::1]:9870"),
            Some("[::1]:9870".parse().unwrap())
        );
        assert_eq!(parse_agent_url("https://127.0.0.1:9870"), None);
        assert_eq!(parse_agent_url("http://127.0.0.1:9870/x"), None);
    }

    #[test]
    fn names_are_encoded() {
        assert_eq!(percent_encode("tb web&x"), "tb%20web%26x");
    }
}
