//! What one request came to: a closed set of kinds, counted by kind — never
//! an error string built per request.

use serde::Serialize;

/// Why a request did not succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The target refused the TCP connection (nothing listening).
    ConnectRefused,
    /// Connecting failed otherwise (unreachable, timed out, no ports left).
    Connect,
    /// The connection was reset or broke while the request was in flight.
    Reset,
    /// No complete response within the per-request timeout.
    Timeout,
    /// The server closed the connection before a complete response.
    Closed,
    /// The response was not valid HTTP/1.1 (bad status line, headers, framing).
    Malformed,
    /// A complete response with a 4xx status.
    Http4xx,
    /// A complete response with a 5xx status.
    Http5xx,
    /// The rendered request did not fit its encoding (a text that is not a
    /// number where an Avro schema wants a `long`, say); nothing was sent.
    Encode,
    /// The Kafka broker answered with an error (not leader, record too
    /// large, not authorised…), or the client failed otherwise.
    KafkaBroker,
    /// The TLS handshake failed (a certificate not trusted, expired or for
    /// another name; no protocol in common).
    Tls,
    /// A complete response that failed one of the request's `check:`s.
    CheckFailed,
    /// More than 10 redirects in a row.
    RedirectLimit,
    /// A value an extract must find (`on_missing: fail`) was not there.
    ExtractMissing,
    /// A redirect to another host, port or scheme than the target's:
    /// autoperf sends traffic only where it was aimed, so it stops there.
    RedirectOffTarget,
    /// A `unique` data feeder had no row left for the request: nothing was
    /// sent, and the user stopped.
    DataExhausted,
    /// A complete response whose body, kept for the request's checks or
    /// extraction, was larger than `target.max_body`: those could not be
    /// judged on all of it.
    BodyTooLarge,
    /// The script's `request(ctx)` failed the request (`ctx:fail(reason)`
    /// or an error in the hook): nothing was sent.
    ScriptRequest,
    /// The script's `response(ctx)` failed a complete response.
    ScriptResponse,
}

impl ErrorKind {
    pub(crate) const ALL: [ErrorKind; 19] = [
        ErrorKind::ConnectRefused,
        ErrorKind::Connect,
        ErrorKind::Reset,
        ErrorKind::Timeout,
        ErrorKind::Closed,
        ErrorKind::Malformed,
        ErrorKind::Http4xx,
        ErrorKind::Http5xx,
        ErrorKind::Encode,
        ErrorKind::KafkaBroker,
        ErrorKind::Tls,
        ErrorKind::CheckFailed,
        ErrorKind::RedirectLimit,
        ErrorKind::RedirectOffTarget,
        ErrorKind::ExtractMissing,
        ErrorKind::DataExhausted,
        ErrorKind::BodyTooLarge,
        ErrorKind::ScriptRequest,
        ErrorKind::ScriptResponse,
    ];

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            ErrorKind::ConnectRefused => "connect_refused",
            ErrorKind::Connect => "connect",
            ErrorKind::Reset => "reset",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Closed => "closed",
            ErrorKind::Malformed => "malformed",
            ErrorKind::Http4xx => "http_4xx",
            ErrorKind::Http5xx => "http_5xx",
            ErrorKind::Encode => "encode",
            ErrorKind::KafkaBroker => "kafka_broker",
            ErrorKind::Tls => "tls",
            ErrorKind::CheckFailed => "check_failed",
            ErrorKind::RedirectLimit => "redirect_limit",
            ErrorKind::RedirectOffTarget => "redirect_off_target",
            ErrorKind::ExtractMissing => "extract_missing",
            ErrorKind::DataExhausted => "data_exhausted",
            ErrorKind::BodyTooLarge => "body_too_large",
            ErrorKind::ScriptRequest => "script_request",
            ErrorKind::ScriptResponse => "script_response",
        }
    }

    /// A complete response came back (so it has a response time).
    pub(crate) fn has_response(self) -> bool {
        matches!(
            self,
            ErrorKind::Http4xx
                | ErrorKind::Http5xx
                | ErrorKind::CheckFailed
                | ErrorKind::RedirectLimit
                | ErrorKind::RedirectOffTarget
                | ErrorKind::ExtractMissing
                | ErrorKind::BodyTooLarge
                | ErrorKind::ScriptResponse
        )
    }

    pub(crate) fn from_status(status: u16) -> Option<ErrorKind> {
        match status {
            400..=499 => Some(ErrorKind::Http4xx),
            500..=599 => Some(ErrorKind::Http5xx),
            _ => None,
        }
    }
}

/// Counts per error kind, indexed by `ErrorKind::index`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ErrorCounts([u64; ErrorKind::ALL.len()]);

impl ErrorCounts {
    pub(crate) fn add(&mut self, kind: ErrorKind) {
        self.0[kind.index()] += 1;
    }

    pub(crate) fn add_many(&mut self, kind: ErrorKind, n: u64) {
        self.0[kind.index()] += n;
    }

    pub(crate) fn merge(&mut self, other: &ErrorCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a = a.saturating_add(*b);
        }
    }

    pub(crate) fn get(&self, kind: ErrorKind) -> u64 {
        self.0[kind.index()]
    }

    pub fn total(&self) -> u64 {
        self.0.iter().fold(0u64, |n, &c| n.saturating_add(c))
    }

    /// Non-zero counts by name, for the record.
    pub(crate) fn by_name(&self) -> std::collections::BTreeMap<&'static str, u64> {
        ErrorKind::ALL
            .iter()
            .filter(|k| self.get(**k) > 0)
            .map(|k| (k.name(), self.get(*k)))
            .collect()
    }
}
