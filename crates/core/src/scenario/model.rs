//! The validated scenario: domain types with units, produced by `decode` from
//! the YAML file and consumed by the engine. After validation nothing here is
//! optional-by-accident or stringly typed: durations are `Duration`, requests
//! and variables are referred to by index newtypes, templates are compiled.

use std::path::PathBuf;
use std::time::Duration;

pub use super::ids::{FeederId, RequestId, VarId};
use super::session::Cbmg;
use super::template::Template;

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    /// The file it was read from (for messages and the report).
    pub source: PathBuf,
    /// The file's text as written, kept for the report.
    pub text: String,
    /// The `--set KEY=VALUE` applied over the text, in order.
    pub overrides: Vec<String>,
    pub target: Target,
    pub think_time: ThinkTime,
    pub feeders: Vec<Feeder>,
    pub requests: Vec<Request>,
    /// Names bound by `extract`, indexed by `VarId`.
    pub variables: Vec<String>,
    pub session: Cbmg,
    pub servers: Vec<ServerSpec>,
    pub prerequisites: Vec<RequestId>,
    pub thresholds: Vec<Threshold>,
    pub capacity: CapacitySettings,
    /// An open workload to run when `run` is given neither users nor a rate.
    pub arrivals: Option<Arrivals>,
    /// A closed workload to run when `run` is given neither users nor a
    /// rate: users at once, or over time.
    pub users: Option<UserStages>,
    /// Workers on other hosts that generate the load (`workers:`).
    pub workers: Option<WorkerSettings>,
}

/// `users:`.
#[derive(Debug, Clone, PartialEq)]
pub enum UserStages {
    /// This many, all from the start.
    All(u32),
    /// From 0, in straight lines through each stage's count.
    Ramp(Vec<UserStage>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UserStage {
    /// Users at the stage's end (a hold: the count already reached).
    pub to: u32,
    /// How long the stage takes (zero: a step).
    pub over: Duration,
}

/// `arrivals:`: rates over time, how arrivals are spaced, and the cap on
/// sessions in flight.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrivals {
    /// One after the other; the last rate holds after its stage.
    pub stages: Vec<ArrivalStage>,
    pub spacing: ArrivalSpacing,
    pub max_in_flight: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ArrivalStage {
    pub rate_per_s: f64,
    /// `None` for a constant rate (no end).
    pub length: Option<Duration>,
}

impl Arrivals {
    /// The length of all stages together (`None` for a constant rate).
    pub fn total(&self) -> Option<Duration> {
        self.stages.iter().map(|s| s.length).sum()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrivalSpacing {
    /// A Poisson process: exponential gaps.
    Poisson,
    /// Exactly 1/rate apart.
    Even,
}

impl Scenario {
    pub fn request(&self, id: RequestId) -> &Request {
        &self.requests[id.index()]
    }

    /// The think time after `id`: its own, or the scenario's.
    pub fn think_after(&self, id: RequestId) -> &ThinkTime {
        self.request(id)
            .think_time
            .as_ref()
            .unwrap_or(&self.think_time)
    }

    /// The mean think time per request of a session, each request's think
    /// weighted by how often a session visits it (the scenario's `think_time`
    /// when no request has its own).
    pub fn mean_think_time(&self) -> Duration {
        if self.requests.iter().all(|r| r.think_time.is_none()) {
            return self.think_time.mean();
        }
        let visits = self.session.expected_visits();
        let total: f64 = visits.iter().sum();
        if total <= 0.0 {
            return self.think_time.mean();
        }
        let weighted: f64 = visits
            .iter()
            .enumerate()
            .map(|(i, v)| v * self.think_after(RequestId(i as u32)).mean().as_secs_f64())
            .sum();
        Duration::from_secs_f64(weighted / total)
    }

    pub fn request_id(&self, name: &str) -> Option<RequestId> {
        self.requests
            .iter()
            .position(|r| r.name == name)
            .map(|i| RequestId(i as u32))
    }
}

#[derive(Debug, Clone)]
pub struct Target {
    pub endpoint: Endpoint,
    /// Per-request timeout: from the first byte written to the last byte
    /// read (HTTP), or from the send to the broker's acknowledgement (Kafka).
    pub timeout: Duration,
    /// How an `https://` target is verified and what the client shows it.
    pub tls: TlsSettings,
    /// `target.cookies`: how long a user's cookie jar keeps its cookies.
    pub cookies: CookiePolicy,
    /// `target.http`: the HTTP version spoken.
    pub http: HttpVersion,
    /// `target.compression`: ask for gzip, deflate and br answers.
    pub compression: bool,
    /// `target.streams_per_connection`: over HTTP/2, how many users share
    /// one connection, each request a stream of it (1: a connection each).
    pub streams_per_connection: u32,
}

/// `target.http`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HttpVersion {
    /// HTTP/1.1, the fastest path and what wrk speaks.
    #[default]
    Http1,
    /// HTTP/2 only: negotiated by ALPN over TLS (a server that does not
    /// accept it fails the run at start), prior knowledge (h2c) in clear.
    Http2,
    /// Whatever the server picks by ALPN, HTTP/2 preferred; HTTP/1.1 over
    /// plain `http://`.
    Auto,
}

/// `target.cookies`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CookiePolicy {
    /// Each user's jar is emptied when its session (a walk of the CBMG)
    /// ends, as a browser's session cookies go when it closes.
    #[default]
    Session,
    /// Kept for the user's whole life in the level.
    User,
    /// No cookies stored or sent.
    Off,
}

/// `target.tls`: certificate verification is on unless `insecure`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// Trust these CA certificates (PEM) instead of the platform's roots.
    pub ca_file: Option<PemFile>,
    /// Accept any certificate (test systems only).
    pub insecure: bool,
    /// The name sent in SNI and checked against the certificate (default:
    /// the base URL's host).
    pub server_name: Option<String>,
    /// A client certificate chain and its key (PEM), for mutual TLS.
    pub client_cert: Option<PemFile>,
    pub client_key: Option<PemFile>,
    /// Verify the chain but not that it names the host (Kafka's
    /// `ssl.endpoint.identification.algorithm` set empty).
    pub skip_hostname: bool,
}

/// Where requests go: one HTTP server, or one Kafka cluster.
// One per scenario: the Kafka variant's size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Endpoint {
    Http(BaseUrl),
    Kafka(KafkaTarget),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Http(base) => base.fmt(f),
            Endpoint::Kafka(kafka) => write!(f, "kafka://{}", kafka.bootstrap),
        }
    }
}

/// `target: {kafka: …}`: the cluster and the producer's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct KafkaTarget {
    /// `host:port[,host:port…]`, as Kafka clients' `bootstrap.servers`.
    pub bootstrap: String,
    pub acks: Acks,
    /// `settings:`, under the names Java's and librdkafka's producers use.
    pub producer: ProducerSettings,
    /// `security.protocol` and its `ssl.*` and `sasl.*` settings.
    pub security: KafkaSecurity,
}

/// How the producer's connections are secured: `security.protocol`
/// `PLAINTEXT` (neither), `SSL` (TLS), `SASL_PLAINTEXT` (SASL) or
/// `SASL_SSL` (both).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KafkaSecurity {
    pub tls: Option<TlsSettings>,
    pub sasl: Option<SaslSettings>,
}

/// `sasl.mechanism`, `sasl.username`, `sasl.password`; for OAUTHBEARER,
/// `sasl.oauthbearer.token` in `password` and no username.
#[derive(Clone, PartialEq)]
pub struct SaslSettings {
    pub mechanism: SaslMechanism,
    pub username: String,
    /// The password, or OAUTHBEARER's bearer token.
    pub password: String,
}

impl std::fmt::Debug for SaslSettings {
    // The password stays out of logs and panics.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslSettings")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// The SASL mechanisms autoperf's producer speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    /// A static bearer token (RFC 7628), as a test or a CI job has one.
    OAuthBearer,
}

impl SaslMechanism {
    pub const ALL: [SaslMechanism; 4] = [
        SaslMechanism::Plain,
        SaslMechanism::ScramSha256,
        SaslMechanism::ScramSha512,
        SaslMechanism::OAuthBearer,
    ];

    /// Its name in `sasl.mechanism` and on the wire.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    pub fn parse(text: &str) -> Option<SaslMechanism> {
        Self::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(text))
    }
}

/// How the producer batches; the defaults are librdkafka's (Java's
/// `batch.size` is 16 KiB), but for idempotence, on as in Java's producer.
#[derive(Debug, Clone, PartialEq)]
pub struct ProducerSettings {
    /// `linger.ms`: how long a batch waits for more records.
    pub linger: Duration,
    /// `batch.size`: a partition's batch goes out at this many bytes.
    pub batch_bytes: u32,
    /// `max.in.flight.requests.per.connection`.
    pub max_in_flight: u32,
    /// `client.id`.
    pub client_id: String,
    /// `metadata.max.age.ms`: partitions and leaders are asked again this
    /// often, so partitions added during a run get their keys' records.
    pub metadata_max_age: Duration,
    /// `compression.type`: how each batch's records are compressed.
    pub compression: Compression,
    /// `compression.level` (`compression.gzip.level`, …): the codec's own
    /// scale; `None` for its default.
    pub compression_level: Option<i32>,
    /// `enable.idempotence`: on by default where acks is all and at most 5
    /// requests are in flight, as Java's producer since Kafka 3.0.
    pub idempotence: bool,
}

/// A record batch's codec, as Kafka numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    pub fn parse(name: &str) -> Option<Compression> {
        Some(match name {
            "none" | "uncompressed" => Compression::None,
            "gzip" => Compression::Gzip,
            "snappy" => Compression::Snappy,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            _ => return None,
        })
    }

    /// Its `compression.type` name.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// The levels the codec takes, `None` for a codec without levels here.
    pub fn levels(self) -> Option<std::ops::RangeInclusive<i32>> {
        match self {
            Compression::Gzip => Some(1..=9),
            Compression::Zstd => Some(1..=22),
            _ => None,
        }
    }
}

impl Default for ProducerSettings {
    fn default() -> Self {
        ProducerSettings {
            linger: Duration::from_millis(5),
            batch_bytes: 1_000_000,
            max_in_flight: 5,
            client_id: "autoperf".to_string(),
            // Java's producer's default.
            metadata_max_age: Duration::from_secs(300),
            compression: Compression::None,
            compression_level: None,
            idempotence: true,
        }
    }
}

/// How many replicas must have a record before the broker acknowledges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// Fire and forget: the "acknowledgement" is the send itself.
    None,
    /// The partition leader has it.
    Leader,
    /// Every in-sync replica has it.
    All,
}

impl Acks {
    /// The `acks` field of a Produce request.
    pub fn code(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }

    /// As written in `acks`.
    pub fn name(self) -> &'static str {
        match self {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        }
    }
}

/// `http://host:port/prefix` or `https://…`, spoken in HTTP/1.1.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BaseUrl {
    /// `https://`: connections are TLS.
    #[serde(default)]
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Path prefix without a trailing slash ("" for the root).
    pub path_prefix: String,
}

impl BaseUrl {
    /// `http://host:port` or `https://host:port`.
    pub fn origin(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.authority())
    }

    /// `host:port` as written in the Host header and used to connect.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl std::fmt::Display for BaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.tls { "https" } else { "http" };
        write!(f, "{scheme}://{}{}", self.authority(), self.path_prefix)
    }
}

/// The pause a user takes between receiving a response and sending its next
/// request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThinkTime {
    Constant(Duration),
    Exponential {
        mean: Duration,
    },
    Uniform {
        min: Duration,
        max: Duration,
    },
    /// Long-tailed: most pauses short, a few very long (what access logs
    /// of real users often show), given by its mean and coefficient of
    /// variation.
    LogNormal {
        mean: Duration,
        cv: f64,
    },
}

impl ThinkTime {
    pub fn mean(&self) -> Duration {
        match *self {
            ThinkTime::Constant(d) => d,
            ThinkTime::Exponential { mean } => mean,
            ThinkTime::Uniform { min, max } => (min + max) / 2,
            ThinkTime::LogNormal { mean, .. } => mean,
        }
    }

    /// Coefficient of variation (standard deviation over mean) of one draw.
    pub fn cv(&self) -> f64 {
        match *self {
            ThinkTime::Constant(_) => 0.0,
            ThinkTime::Exponential { .. } => 1.0,
            ThinkTime::Uniform { min, max } => {
                let mean = (min + max).as_secs_f64() / 2.0;
                if mean > 0.0 {
                    (max - min).as_secs_f64() / 12f64.sqrt() / mean
                } else {
                    0.0
                }
            }
            ThinkTime::LogNormal { cv, .. } => cv,
        }
    }

    /// One draw, from a uniform variate `u` in [0, 1).
    pub fn sample(&self, u: f64) -> Duration {
        match *self {
            ThinkTime::Constant(d) => d,
            // Inverse transform; 1-u is in (0, 1] so the log is finite.
            ThinkTime::Exponential { mean } => mean.mul_f64(-(1.0 - u).ln()),
            ThinkTime::Uniform { min, max } => min + (max - min).mul_f64(u),
            ThinkTime::LogNormal { mean, cv } => {
                use statrs::distribution::{ContinuousCDF, Normal};
                // ln X ~ N(μ, σ²) with E[X] = mean and CV = cv.
                let sigma2 = (1.0 + cv * cv).ln();
                let mu = mean.as_secs_f64().max(1e-9).ln() - sigma2 / 2.0;
                let z = Normal::standard().inverse_cdf(u);
                let x = (mu + sigma2.sqrt() * z).exp();
                // u = 0 gives 0; a draw past a day is a day.
                Duration::from_secs_f64(if x.is_finite() { x.min(86_400.0) } else { 0.0 })
            }
        }
    }
}

/// A `data:` entry: rows of name-value pairs from a CSV file with a header,
/// or a generated range of integers. Each use takes the next row, wrapping
/// around.
#[derive(Debug, Clone)]
pub struct Feeder {
    pub name: String,
    pub source: FeederSource,
    pub mode: FeederMode,
    pub columns: Vec<String>,
    /// Never empty: validation rejects a file without data rows.
    pub rows: Vec<Vec<String>>,
}

/// How a feeder hands out its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FeederMode {
    /// In order, shared by all users, round and round (the default).
    #[default]
    Sequential,
    /// A row drawn at random for each use.
    Random,
    /// Each row once in the whole level; a user whose request finds none
    /// left stops (`data_exhausted`).
    Unique,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeederSource {
    /// `{csv: file}`: the file, resolved against the scenario's directory.
    Csv(PathBuf),
    /// `{range: [from, to]}`: one column `n`, the integers from..=to.
    Range { from: i64, to: i64 },
}

#[derive(Debug, Clone)]
pub struct Request {
    pub name: String,
    pub action: Action,
    /// Empty for `produce` requests (a broker's acknowledgement has no body).
    pub extracts: Vec<Extract>,
    /// `check:`: what a correct response looks like (HTTP only).
    pub checks: Vec<Check>,
    /// `think_time:` after this request, instead of the scenario's.
    pub think_time: Option<ThinkTime>,
}

impl Request {
    /// Every template of the request: what it sends, and its checks.
    pub fn templates(&self) -> Vec<&Template> {
        let mut t = Vec::new();
        match &self.action {
            Action::Http(h) => {
                t.push(&h.path);
                t.extend(h.headers.iter().map(|(_, v)| v));
                match &h.body {
                    Some(Body::Form(fields)) => t.extend(fields.iter().map(|(_, v)| v)),
                    Some(Body::Json(b)) | Some(Body::Raw(b)) => t.push(b),
                    None => {}
                }
            }
            Action::Produce(p) => {
                t.extend(p.key.iter());
                match &p.value {
                    RecordValue::Json(v) | RecordValue::Raw(v) => t.push(v),
                    RecordValue::Avro(a) => t.extend(a.record.templates()),
                }
            }
        }
        for check in &self.checks {
            match &check.kind {
                CheckKind::BodyContains(v) | CheckKind::Json { expected: v, .. } => t.push(v),
                _ => {}
            }
        }
        t
    }

    /// The feeders the request reads, each once.
    pub fn feeders(&self) -> Vec<FeederId> {
        let mut f: Vec<FeederId> = self.templates().iter().flat_map(|t| t.feeders()).collect();
        f.sort_by_key(|id| id.index());
        f.dedup();
        f
    }

    /// Whether the response's head and body must be kept (to check or
    /// extract from them); other responses are only measured.
    pub fn reads_response(&self) -> bool {
        !self.extracts.is_empty() || !self.checks.is_empty()
    }
}

/// One check of a response; a request whose check fails counts as an
/// error of kind `check_failed`.
#[derive(Debug, Clone)]
pub struct Check {
    /// How the record names it: `status`, `body_contains`, `body_regex`,
    /// `header Location`, `json $.user.id`.
    pub name: String,
    pub kind: CheckKind,
}

#[derive(Debug, Clone)]
pub enum CheckKind {
    /// The status is one of these (which then count as success, 4xx and
    /// 5xx included).
    Status(Vec<u16>),
    /// The body holds this text (a template: `${var}` is the user's value).
    BodyContains(Template),
    BodyRegex(regex::bytes::Regex),
    /// The header is present and its value matches.
    Header {
        name: String,
        regex: regex::Regex,
    },
    /// The JSON body has a value at the path equal to `expected` (a string
    /// compares with a JSON string's text, anything else with the value's
    /// JSON text).
    Json {
        path: serde_json_path::JsonPath,
        expected: Template,
    },
}

/// What a request does: an HTTP exchange, or a record sent to Kafka.
#[derive(Debug, Clone)]
pub enum Action {
    Http(HttpRequest),
    Produce(Produce),
}

#[derive(Debug, Clone)]
pub struct HttpRequest {
    /// Upper-case HTTP method token, e.g. "GET".
    pub method: String,
    /// Path and query, appended to the base URL's prefix; starts with '/'.
    pub path: Template,
    pub headers: Vec<(String, Template)>,
    pub body: Option<Body>,
    /// Redirects are followed unless `follow_redirects: false`.
    pub follow_redirects: bool,
}

/// `produce:`: one record to a topic.
#[derive(Debug, Clone)]
pub struct Produce {
    pub topic: String,
    /// `None`: no key (the partitioner then spreads records at random).
    pub key: Option<Template>,
    pub value: RecordValue,
}

/// How a record's value is written.
#[derive(Debug, Clone)]
pub enum RecordValue {
    /// JSON text (the template's expansions JSON-escaped).
    Json(Template),
    /// Bytes as written.
    Raw(Template),
    Avro(AvroValue),
}

/// `value: {avro: …}`: a record template encoded per a schema.
#[derive(Debug, Clone)]
pub struct AvroValue {
    /// The schema as JSON text (what a registry is given).
    pub schema_json: String,
    /// Compiled against the schema: renders Avro binary directly.
    pub record: super::avro::AvroTemplate,
    pub framing: AvroFraming,
}

/// Whether the Avro datum goes bare or in Confluent's schema-registry wire
/// format: magic byte 0, the schema id as 4 bytes big-endian, the datum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AvroFraming {
    Bare,
    /// `schema_id: N`: a known id, no registry asked.
    SchemaId(u32),
    /// `registry: {url, subject}`: the schema is registered under the
    /// subject when the run starts, and the id the registry returns is used.
    Registry {
        url: BaseUrl,
        subject: String,
    },
}

#[derive(Debug, Clone)]
pub enum Body {
    /// `application/x-www-form-urlencoded`; keys and the values' literal
    /// parts are form-encoded already, and the values' expansions are
    /// encoded as they render, so the engine joins `key=value` with `&`.
    Form(Vec<(String, Template)>),
    /// `application/json`; one template of the whole document whose
    /// expansions are JSON-string-escaped.
    Json(Template),
    /// Sent as written; no Content-Type unless given in `headers`.
    Raw(Template),
}

impl Body {
    pub fn content_type(&self) -> Option<&'static str> {
        match self {
            Body::Form(_) => Some("application/x-www-form-urlencoded"),
            Body::Json(_) => Some("application/json"),
            Body::Raw(_) => None,
        }
    }
}

/// Binds a per-user variable from a response body.
#[derive(Debug, Clone)]
pub struct Extract {
    pub var: VarId,
    pub from: ExtractFrom,
    pub on_missing: OnMissing,
}

/// What an extract does when its value is not in the response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnMissing {
    /// The variable keeps the value it had (the default).
    Keep,
    /// The request fails as `extract_missing`.
    Fail,
    /// The variable takes this value.
    Default(Vec<u8>),
}

#[derive(Debug, Clone)]
pub enum ExtractFrom {
    /// The first capture group of the first match (the whole match when the
    /// regex has no group).
    Regex(regex::bytes::Regex),
    /// An RFC 6901 pointer into a JSON body; strings unquoted, other values
    /// as JSON text.
    JsonPointer(String),
    /// A JSONPath (`$.items[0].id`) into a JSON body: its first match.
    JsonPath(serde_json_path::JsonPath),
    /// A response header's value, or the first group of `regex` in it.
    Header {
        name: String,
        regex: Option<regex::bytes::Regex>,
    },
    /// The user's cookie of that name (after this response's Set-Cookie).
    Cookie(String),
}

/// A server process group that may be the bottleneck (used by the agent and
/// capacity work).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    pub tier: String,
    /// Base URL of the profiler agent on that host.
    pub agent: String,
    /// Process names (or command-line substrings) forming the group.
    pub processes: Vec<String>,
    /// Cores available to the tier; `None` means "ask the agent".
    pub cores: Option<u32>,
    /// The bearer token the agent wants (`token_file:`), if any.
    pub token: Option<String>,
}

/// An SLO such as `p99 < 250ms` or `login.error_rate < 1%`.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The expression as written, for messages and reports.
    pub source: String,
    /// `None` for the whole run, or one request.
    pub request: Option<RequestId>,
    pub metric: Metric,
    pub op: Comparison,
    /// In the metric's unit: milliseconds for times, a fraction (0.01 for 1%)
    /// for `error_rate`, requests per second for `throughput`.
    pub bound: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Mean,
    Max,
    /// A percentile, in per-mille to keep it exact: p99 is 990, p99.9 is 999.
    Percentile(u16),
    ErrorRate,
    /// The share of `check:`s that passed.
    Checks,
    Throughput,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

impl Comparison {
    pub fn holds(self, value: f64, bound: f64) -> bool {
        match self {
            Comparison::Less => value < bound,
            Comparison::LessOrEqual => value <= bound,
            Comparison::Greater => value > bound,
            Comparison::GreaterOrEqual => value >= bound,
        }
    }
}

/// Tunables of the automatic capacity analysis (AutoPerf section 2.1), with
/// the paper's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacitySettings {
    /// Relative change (fraction) between consecutive time-averaged
    /// throughputs below which a level is at steady state.
    pub epsilon: f64,
    /// Minimum bottleneck utilisation of the lowest level tested.
    pub rho_min: f64,
    /// Relative tolerance of the piecewise-linear fit in the bisection.
    pub tolerance: f64,
    /// Consecutive overloaded levels that confirm overload.
    pub k_ovld: u32,
    /// Gap between achieved and configured think time (fraction) that marks
    /// a client bottleneck.
    pub think_gap: f64,
    pub min_duration: Duration,
    pub max_duration: Duration,
    /// Width of the time-averaging window for steady-state detection.
    pub window: Duration,
    /// Convergence threshold (percent) of the service-demand checks.
    pub demand_epsilon: f64,
    /// Profiler readings after which a near-zero process is ignored
    /// (`p_max` in the paper).
    pub p_max: u32,
    /// Assumed CPU time when every process still reads zero after `p_max`
    /// readings (`S_low`).
    pub s_low: Duration,
    /// Levels tested past the saturation estimate `N*`.
    pub levels_beyond: u32,
    /// How the levels inside the range are chosen.
    pub search: SearchStrategy,
    /// The open search: a rate passes only when at least this fraction of
    /// it is delivered (Theodolite's rule, 95%).
    pub min_achieved: f64,
    /// The open search ends when the first failing rate is within this
    /// fraction above the highest passing one.
    pub rate_precision: f64,
    /// The open search's ramp: each passing rate times this, until one fails.
    pub rate_factor: f64,
    /// A level with more failed requests than this fraction is invalid:
    /// marked so, never a curve point; it ends a capacity analysis.
    pub max_error_rate: f64,
}

/// How the levels between `N_min` and the top are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SearchStrategy {
    /// The queueing model of the measured demands picks the levels
    /// (`capacity/guided.rs`); bisection where it has no demands to go on.
    #[default]
    Model,
    /// The paper's recursive bisection (2.1.2).
    Bisection,
}

impl SearchStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            SearchStrategy::Model => "model",
            SearchStrategy::Bisection => "bisection",
        }
    }

    pub fn parse(text: &str) -> Option<SearchStrategy> {
        match text {
            "model" => Some(SearchStrategy::Model),
            "bisection" => Some(SearchStrategy::Bisection),
            _ => None,
        }
    }
}

impl Default for CapacitySettings {
    fn default() -> Self {
        CapacitySettings {
            epsilon: 0.05,
            rho_min: 0.1,
            tolerance: 0.05,
            k_ovld: 3,
            think_gap: 0.10,
            min_duration: Duration::from_secs(10),
            max_duration: Duration::from_secs(120),
            window: Duration::from_secs(5),
            demand_epsilon: 5.0,
            p_max: 15,
            s_low: Duration::from_millis(5),
            levels_beyond: 2,
            search: SearchStrategy::Model,
            min_achieved: 0.95,
            rate_precision: 0.02,
            rate_factor: 2.0,
            max_error_rate: 0.5,
        }
    }
}

/// `workers:`: load generator workers on other hosts (`autoperf worker`)
/// that run the levels instead of this one. `--workers` and its sibling
/// flags override it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSettings {
    pub addresses: Vec<WorkerSpec>,
    /// The file whose first line is the workers' token (relative paths
    /// from the scenario's directory); read by the controller only.
    pub token_file: Option<PathBuf>,
    /// PEM CA certificate(s) to check the workers' TLS certificates
    /// with; TLS to them when set. Read by the controller only.
    pub ca_file: Option<PathBuf>,
    /// Workers that must answer before the first level.
    pub min: Option<u32>,
    /// Workers a capacity analysis starts on.
    pub start: Option<u32>,
}

/// Where workers are: an address, or a DNS name whose every address is one
/// (a Kubernetes headless Service resolves to its ready pods).
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerSpec {
    /// `host:port` (a name resolves to its first address).
    Host(String),
    /// `dns:NAME:PORT`: every address NAME resolves to.
    Dns { name: String, port: u16 },
}

impl WorkerSpec {
    pub fn parse(text: &str) -> Result<WorkerSpec, String> {
        let text = text.trim();
        if let Some(rest) = text.strip_prefix("dns:") {
            let (name, port) = rest.rsplit_once(':').ok_or_else(|| {
                format!("`{text}`: expected dns:NAME:PORT, e.g. dns:autoperf-workers:7420")
            })?;
            let port = port
                .parse::<u16>()
                .map_err(|_| format!("`{text}`: `{port}` is no port number"))?;
            if name.is_empty() {
                return Err(format!("`{text}`: the DNS name is empty"));
            }
            return Ok(WorkerSpec::Dns {
                name: name.to_string(),
                port,
            });
        }
        match text.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(WorkerSpec::Host(text.to_string()))
            }
            _ => Err(format!(
                "`{text}`: expected host:port (e.g. 10.0.0.5:7420) or dns:NAME:PORT"
            )),
        }
    }
}

impl std::fmt::Display for WorkerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkerSpec::Host(text) => f.write_str(text),
            WorkerSpec::Dns { name, port } => write!(f, "dns:{name}:{port}"),
        }
    }
}

/// A PEM file a setting names: where it was, and what it held when the
/// scenario was decoded. TLS is set up from the bytes, so a worker on
/// another host needs no copy of the file (they are shipped with its job).
#[derive(Clone, PartialEq, Eq)]
pub struct PemFile {
    pub path: PathBuf,
    pub pem: Vec<u8>,
}

impl std::fmt::Debug for PemFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never a private key's bytes.
        write!(
            f,
            "PemFile({}, {} bytes)",
            self.path.display(),
            self.pem.len()
        )
    }
}
