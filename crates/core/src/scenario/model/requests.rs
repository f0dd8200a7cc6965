//! `requests:`: what each request does — an HTTP exchange (method, path,
//! headers, body) or a record produced to Kafka (plain or Avro) — and what
//! it checks in and extracts from the response.

use super::super::avro::AvroTemplate;
use super::super::condition::Condition;
use super::super::ids::{FeederId, VarId};
use super::super::template::Template;
use super::load::ThinkTime;
use super::target::BaseUrl;

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
    /// `set:`: variables computed, in this order, before the request is
    /// rendered.
    pub sets: Vec<(VarId, Template)>,
    /// `skip_if:`: when it holds as a user comes to the request, nothing
    /// is sent and the session goes on from it.
    pub skip_if: Option<Condition>,
}

impl Request {
    /// Every template of the request: what it sends, its checks, and its
    /// `skip_if:` (judged with the rows the request would send).
    pub(crate) fn templates(&self) -> Vec<&Template> {
        let mut t: Vec<&Template> = self.sets.iter().map(|(_, v)| v).collect();
        t.extend(self.skip_if.iter().flat_map(Condition::templates));
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
    pub(crate) fn feeders(&self) -> Vec<FeederId> {
        let mut f: Vec<FeederId> = self.templates().iter().flat_map(|t| t.feeders()).collect();
        f.sort_by_key(|id| id.index());
        f.dedup();
        f
    }

    /// Whether the response's head and body must be kept (to check or
    /// extract from them); other responses are only measured.
    pub(crate) fn reads_response(&self) -> bool {
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
    pub record: AvroTemplate,
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
    pub(crate) fn content_type(&self) -> Option<&'static str> {
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
