//! Prometheus as a source of what the servers spent: tiers whose figures
//! are read through PromQL (`servers[].prometheus`) and SLOs on anything the
//! system exports (`thresholds: [{promql: …}]`).
//!
//! A tier's queries are evaluated at the instant of each sampler reading
//! (the query API with an explicit `time=`) and made into the same
//! counters an agent reports, so demands, utilisation, memory, N* and the
//! model work unchanged: its CPU counter is differenced between readings
//! as an agent's is. A PromQL threshold is evaluated over a level's
//! measured window (`query_range`), and its worst point kept.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use autoperf_agent::api::{AgentInfo, CpuTimes, GroupCounters, HostCounters};

use crate::protocol::http1::Connection;
use crate::protocol::side::{self, percent_encode};
use crate::protocol::tls::Tls;
use crate::record::PromqlFigure;
use crate::scenario::{BaseUrl, PrometheusQueries, TlsSettings};
use autoperf_agent::Counters;

/// How long one query may take.
pub(crate) const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// The most of an answer kept: a range query over a long level's window
/// with many series is the largest.
const MAX_ANSWER: usize = 16 << 20;

/// One Prometheus server: where it is and how to ask it.
#[derive(Clone)]
pub(crate) struct Client {
    base: BaseUrl,
    tls: Option<Tls>,
    authorization: Option<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Prometheus at {}{}",
            self.base.origin(),
            self.base.path_prefix
        )
    }
}

/// Why a query gave no figure.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryError {
    /// Nothing answered (a closed port, a timeout): the transport's words.
    Unreachable(String),
    /// Prometheus answered with an error: its own message.
    Refused(String),
    /// The query is valid but selects nothing.
    NoSeries,
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryError::Unreachable(why) => write!(f, "no answer ({why})"),
            QueryError::Refused(why) => write!(f, "Prometheus refused it: {why}"),
            QueryError::NoSeries => write!(
                f,
                "it returns no series (check the metric's name and labels in Prometheus's own UI)"
            ),
        }
    }
}

impl Client {
    pub(crate) fn new(base: &BaseUrl, authorization: Option<String>) -> Result<Client, String> {
        let tls = base
            .tls
            .then(|| Tls::new(base, &TlsSettings::default(), &[b"http/1.1"]))
            .transpose()?;
        Ok(Client {
            base: base.clone(),
            tls,
            authorization,
        })
    }

    /// `query` at the instant `at` (seconds since the Unix epoch): the
    /// value of each series (a scalar is one).
    pub(crate) async fn instant(
        &self,
        conn: &mut Option<Connection>,
        query: &str,
        at: f64,
    ) -> Result<Vec<f64>, QueryError> {
        let params = format!("query={}&time={at:.3}", percent_encode(query));
        let data = self.get(conn, "query", &params).await?;
        let result = &data["result"];
        let values: Vec<f64> = match data["resultType"].as_str() {
            Some("scalar") => sample(result).into_iter().collect(),
            _ => result
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|series| sample(&series["value"]))
                .collect(),
        };
        if values.is_empty() {
            return Err(QueryError::NoSeries);
        }
        Ok(values)
    }

    /// `query` every `step` over `[start, end]`: every point of every
    /// series.
    pub(crate) async fn range(
        &self,
        conn: &mut Option<Connection>,
        query: &str,
        start: f64,
        end: f64,
        step: f64,
    ) -> Result<Vec<f64>, QueryError> {
        let params = format!(
            "query={}&start={start:.3}&end={end:.3}&step={step:.3}",
            percent_encode(query)
        );
        let data = self.get(conn, "query_range", &params).await?;
        let values: Vec<f64> = data["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|series| series["values"].as_array())
            .flatten()
            .filter_map(sample)
            .collect();
        if values.is_empty() {
            return Err(QueryError::NoSeries);
        }
        Ok(values)
    }

    /// One GET of `/api/v1/{api}?{params}`: the answer's `data`.
    async fn get(
        &self,
        conn: &mut Option<Connection>,
        api: &str,
        params: &str,
    ) -> Result<serde_json::Value, QueryError> {
        let auth = self
            .authorization
            .as_ref()
            .map(|a| format!("Authorization: {a}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "GET {}/api/v1/{api}?{params} HTTP/1.1\r\nHost: {}\r\nUser-Agent: autoperf/{}\r\nAccept: application/json\r\n{auth}\r\n",
            self.base.path_prefix,
            self.base.authority(),
            env!("CARGO_PKG_VERSION"),
        );
        let exchange = side::exchange(
            conn,
            &self.base,
            self.tls.as_ref(),
            request.as_bytes(),
            MAX_ANSWER,
        );
        let (status, body) = match tokio::time::timeout(QUERY_TIMEOUT, exchange).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(why)) => return Err(QueryError::Unreachable(why)),
            Err(_) => {
                *conn = None;
                return Err(QueryError::Unreachable(format!(
                    "none within {} s",
                    QUERY_TIMEOUT.as_secs()
                )));
            }
        };
        let text = String::from_utf8_lossy(&body);
        let Ok(answer) = serde_json::from_str::<serde_json::Value>(&text) else {
            // Not the query API (a proxy's login page, a wrong path).
            let head: String = text.trim().chars().take(200).collect();
            return Err(QueryError::Refused(format!(
                "HTTP {status}, not the query API's JSON: {head}"
            )));
        };
        if answer["status"] != "success" {
            let kind = answer["errorType"].as_str().unwrap_or("error");
            let why = answer["error"].as_str().unwrap_or("(no message)");
            return Err(QueryError::Refused(format!("HTTP {status}, {kind}: {why}")));
        }
        Ok(answer["data"].clone())
    }
}

/// `[time, "value"]` → the value (Prometheus writes `NaN`, `+Inf`).
fn sample(pair: &serde_json::Value) -> Option<f64> {
    match pair.get(1)?.as_str()? {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        text => text.parse().ok(),
    }
}

/// Seconds since the Unix epoch, now.
pub(crate) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The tiers one Prometheus server reports on.
#[derive(Debug, Clone)]
pub(crate) struct Tiers {
    pub client: Client,
    /// Each tier's name, queries and cores.
    pub tiers: Vec<(String, PrometheusQueries, u32)>,
}

impl Tiers {
    /// The tier whose query `query` is.
    pub(crate) fn tier_of(&self, query: &str) -> &str {
        self.tiers
            .iter()
            .find(|(_, q, _)| q.cpu == query || q.memory.as_deref() == Some(query))
            .map_or("?", |(tier, ..)| tier)
    }

    /// Every tier's queries at `at`, as the counters an agent would have
    /// reported: a group per tier named as the tier, its CPU counter, its
    /// memory, and (in `processes`) how many series the CPU query summed,
    /// its replicas.
    pub(crate) async fn counters(
        &self,
        conn: &mut Option<Connection>,
        at: f64,
    ) -> Result<Counters, (String, QueryError)> {
        let mut processes = BTreeMap::new();
        for (tier, queries, _) in &self.tiers {
            let cpu = self
                .client
                .instant(conn, &queries.cpu, at)
                .await
                .map_err(|e| (queries.cpu.clone(), e))?;
            let rss_bytes = match &queries.memory {
                None => 0,
                Some(q) => {
                    let bytes = self
                        .client
                        .instant(conn, q, at)
                        .await
                        .map_err(|e| (q.clone(), e))?;
                    bytes.iter().filter(|b| b.is_finite()).sum::<f64>().max(0.0) as u64
                }
            };
            let cpu_s: f64 = cpu.iter().filter(|c| c.is_finite()).sum();
            processes.insert(
                tier.clone(),
                GroupCounters {
                    cpu_s,
                    utime_s: cpu_s,
                    stime_s: 0.0,
                    read_bytes: None,
                    write_bytes: None,
                    rchar: None,
                    wchar: None,
                    processes: cpu.len() as u32,
                    threads: 0,
                    rss_bytes,
                    departed: 0,
                    cpu_wait_s: None,
                    sched_cpu_s: None,
                    // A tier without a memory query did not ask for it.
                    missing: Vec::new(),
                    net: None,
                    memory_anon_bytes: None,
                    memory_file_bytes: None,
                },
            );
        }
        let cores = self.tiers.iter().map(|(_, _, c)| *c).max().unwrap_or(1);
        Ok(Counters {
            agent: AgentInfo {
                name: "prometheus".into(),
                version: String::new(),
                // Prometheus's counters are not a process's of its own:
                // no restart to guard against.
                started_ms: 0,
            },
            timestamp_ms: (at * 1e3) as u64,
            // The evaluation instants are the readings' clock.
            monotonic_s: at,
            host: HostCounters {
                cores,
                available_parallelism: cores,
                clk_tck: 100,
                cpu: CpuTimes {
                    busy_s: 0.0,
                    total_s: 0.0,
                    steal_s: 0.0,
                },
                net: BTreeMap::new(),
                disk: BTreeMap::new(),
            },
            processes,
            cgroups: BTreeMap::new(),
            unmatched_cgroups: BTreeMap::new(),
        })
    }
}

/// Blocking: `query` over `[start, end]` (Unix seconds), about 60 points
/// and never closer than a second apart.
pub(crate) fn over_window(
    client: &Client,
    query: &str,
    start: f64,
    end: f64,
) -> Result<PromqlFigure, QueryError> {
    let step = ((end - start) / 60.0).max(1.0);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| QueryError::Unreachable(e.to_string()))?;
    let values = runtime.block_on(client.range(&mut None, query, start, end.max(start), step))?;
    let finite: Vec<f64> = values.into_iter().filter(|v| !v.is_nan()).collect();
    if finite.is_empty() {
        return Err(QueryError::NoSeries);
    }
    Ok(PromqlFigure {
        min: finite.iter().copied().fold(f64::INFINITY, f64::min),
        max: finite.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        points: finite.len() as u32,
    })
}

/// Blocking: `query` once, now; for the checks before a run.
pub(crate) fn check(client: &Client, query: &str) -> Result<(), QueryError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| QueryError::Unreachable(e.to_string()))?;
    runtime
        .block_on(client.instant(&mut None, query, unix_now()))
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_and_encoding() {
        let v = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
        assert_eq!(sample(&v(r#"[1.5, "2.25"]"#)), Some(2.25));
        assert_eq!(sample(&v(r#"[1.5, "+Inf"]"#)), Some(f64::INFINITY));
        assert!(sample(&v(r#"[1.5, "NaN"]"#)).unwrap().is_nan());
        assert_eq!(sample(&v(r#"[1.5]"#)), None);
        assert_eq!(
            percent_encode(r#"sum(x{job="web"})"#),
            "sum%28x%7Bjob%3D%22web%22%7D%29"
        );
    }
}
