//! `target:`: where requests go — one HTTP server (`BaseUrl`) or one Kafka
//! cluster — and how the HTTP client behaves there: its timeout, HTTP
//! version, cookie jar, compression and streams per connection.

use std::time::Duration;

use super::kafka::KafkaTarget;
use super::tls::TlsSettings;

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
    /// `target.max_body`: the most of one answer's body kept for checks
    /// and extraction (`DEFAULT_MAX_BODY` unless given); a longer one is
    /// read to its end and counted `body_too_large`.
    pub max_body: usize,
}

/// `target.max_body` when the scenario gives none: what checks and
/// extraction may read of one answer (a JSON document of 1 MiB parses into
/// some 30 MiB).
pub(crate) const DEFAULT_MAX_BODY: usize = 1 << 20;

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
    pub(crate) fn origin(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.authority())
    }

    /// `host:port` as written in the Host header and used to connect.
    pub(crate) fn authority(&self) -> String {
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
