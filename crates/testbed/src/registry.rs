//! A stub of Confluent's Schema Registry, in memory: the part of its REST API
//! that producers' serializers and consumers' deserializers call, so Kafka
//! tests can use the schema-registry wire format (magic byte 0, 4-byte
//! big-endian schema id, Avro binary) without the real registry, which no
//! package registry reachable here serves.
//!
//! | request | answer |
//! |---|---|
//! | `POST /subjects/{subject}/versions` `{"schema", "schemaType"?}` | `{"id"}`: registers, or finds the same schema again |
//! | `POST /subjects/{subject}` `{"schema", "schemaType"?}` | the subject's version holding that schema, or 404 |
//! | `GET /schemas/ids/{id}` | `{"schema", "schemaType"?}` |
//! | `GET /schemas/ids/{id}/versions` | `[{"subject", "version"}]` |
//! | `GET /subjects` | the subjects' names |
//! | `GET /subjects/{subject}/versions` | the subject's version numbers |
//! | `GET /subjects/{subject}/versions/{n}` and `/latest` | `{"subject", "version", "id", "schema", "schemaType"?}` |
//! | `GET /associations/resources/{namespace}/{topic}` | `[]`: no topic is bound to a subject, so clients name subjects by their fallback strategy (`TOPIC-value`) |
//!
//! As in the real registry, ids are global (the same schema under two
//! subjects has one id) and versions count per subject from 1; query
//! parameters (`?normalize=`, `?subject=`, `?deleted=`) are accepted and
//! ignored. Two schemas are the same when they are the same JSON value, so
//! whitespace and key order do not matter; the real registry compares Avro's
//! canonical form, which also ignores `doc` — a stub may be stricter. Errors
//! carry Confluent's codes (40401 subject, 40402 version, 40403 schema,
//! 42201 invalid schema) in `{"error_code", "message"}`. `schemaType` is
//! omitted for Avro, the default, as the real registry does.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use http_body_util::{BodyExt, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use crate::http::{self, Body, Handler};

/// The registry's media type, which clients send in `Accept` and expect back.
const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// Largest accepted request body: a schema of a megabyte is already absurd.
const MAX_BODY_BYTES: usize = 1 << 20;

/// Serves a fresh, empty registry on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    Arc::new(SchemaRegistry::default())
        .serve(listener, shutdown)
        .await
}

/// The registry's state, shared by its connections; keep an `Arc` of it to
/// look at what clients did.
#[derive(Debug, Default)]
pub struct SchemaRegistry {
    state: Mutex<State>,
    hits: HitCounters,
}

/// How many requests of each kind the registry answered, errors included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hits {
    /// `POST /subjects/{subject}/versions`.
    pub register: u64,
    /// `POST /subjects/{subject}`.
    pub lookup: u64,
    /// `GET /schemas/ids/{id}` and its `/versions`.
    pub by_id: u64,
    /// Every other request.
    pub other: u64,
}

#[derive(Debug, Default)]
struct HitCounters {
    register: AtomicU64,
    lookup: AtomicU64,
    by_id: AtomicU64,
    other: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    /// Schema id n is `schemas[n - 1]`.
    schemas: Vec<Stored>,
    /// A schema's identity → its id.
    ids: HashMap<(String, Value), u32>,
    /// Subject → the ids of its versions; version v is `[v - 1]`.
    subjects: BTreeMap<String, Vec<u32>>,
}

#[derive(Debug)]
struct Stored {
    /// The text as first registered, returned verbatim.
    text: String,
    /// `AVRO`, `JSON` or `PROTOBUF`.
    kind: String,
}

/// A request's failure, in the registry's error format.
#[derive(Debug)]
struct Error {
    status: StatusCode,
    code: u32,
    message: String,
}

impl Error {
    fn new(status: StatusCode, code: u32, message: impl Into<String>) -> Error {
        Error {
            status,
            code,
            message: message.into(),
        }
    }

    fn subject_not_found(subject: &str) -> Error {
        Error::new(
            StatusCode::NOT_FOUND,
            40401,
            format!("Subject '{subject}' not found."),
        )
    }

    fn version_not_found(version: &str) -> Error {
        Error::new(
            StatusCode::NOT_FOUND,
            40402,
            format!("Version {version} not found."),
        )
    }

    fn schema_not_found() -> Error {
        Error::new(StatusCode::NOT_FOUND, 40403, "Schema not found")
    }

    fn invalid_schema(why: impl std::fmt::Display) -> Error {
        Error::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            42201,
            format!("Invalid schema: {why}"),
        )
    }

    fn bad_request(message: impl Into<String>) -> Error {
        Error::new(StatusCode::BAD_REQUEST, 400, message)
    }

    fn into_response(self) -> Response<Body> {
        reply(
            self.status,
            &json!({ "error_code": self.code, "message": self.message }),
        )
    }
}

fn reply(status: StatusCode, value: &Value) -> Response<Body> {
    http::respond(status, CONTENT_TYPE, value.to_string())
}

/// A schema as a request names it: its text and type.
struct Submitted {
    text: String,
    kind: String,
    /// What identifies it: the parsed JSON for Avro and JSON Schema, the text
    /// for Protobuf.
    identity: Value,
}

impl SchemaRegistry {
    /// Serves this registry on `listener` until `shutdown` completes.
    pub async fn serve(
        self: Arc<Self>,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()>,
    ) -> anyhow::Result<()> {
        // Answers cost microseconds: one loop serves them all.
        let workers = crate::burn::Workers::new("registry", 1)?;
        http::serve(listener, None, &workers, |_| Arc::clone(&self), shutdown).await
    }

    /// The requests answered so far, by kind.
    pub fn hits(&self) -> Hits {
        Hits {
            register: self.hits.register.load(Ordering::Relaxed),
            lookup: self.hits.lookup.load(Ordering::Relaxed),
            by_id: self.hits.by_id.load(Ordering::Relaxed),
            other: self.hits.other.load(Ordering::Relaxed),
        }
    }

    /// The text of schema `id`, as first registered.
    pub fn schema(&self, id: u32) -> Option<String> {
        let state = self.state();
        let index = usize::try_from(id).ok()?.checked_sub(1)?;
        state.schemas.get(index).map(|s| s.text.clone())
    }

    /// Registers `schema` (Avro) under `subject` as a client would, and
    /// returns its id: for tests that need a known id before any client runs.
    pub fn register(&self, subject: &str, schema: &str) -> anyhow::Result<u32> {
        let submitted = parse_submitted(&json!({ "schema": schema }))
            .map_err(|e| anyhow::anyhow!("{}", e.message))?;
        Ok(self.state().register(subject, submitted))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every update leaves the state whole, so a poisoned lock is fine.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn route(&self, req: Request<Incoming>) -> Result<Response<Body>, Error> {
        let method = req.method().clone();
        let path = req.uri().path().to_owned();
        let segments: Vec<String> = path
            .trim_matches('/')
            .split('/')
            .map(percent_decode)
            .collect::<Result<_, _>>()?;
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        let counter = match (&method, segments.as_slice()) {
            (&Method::POST, ["subjects", _, "versions"]) => &self.hits.register,
            (&Method::POST, ["subjects", _]) => &self.hits.lookup,
            (_, ["schemas", "ids", ..]) => &self.hits.by_id,
            _ => &self.hits.other,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        match (&method, segments.as_slice()) {
            (&Method::POST, ["subjects", subject, "versions"]) => {
                let submitted = parse_submitted(&read_json(req).await?)?;
                let id = self.state().register(subject, submitted);
                Ok(reply(StatusCode::OK, &json!({ "id": id })))
            }
            (&Method::POST, ["subjects", subject]) => {
                let submitted = parse_submitted(&read_json(req).await?)?;
                let found = self.state().lookup(subject, &submitted)?;
                Ok(reply(StatusCode::OK, &found))
            }
            (&Method::GET, ["schemas", "ids", id]) => {
                let state = self.state();
                let stored = state.by_id(id)?;
                let mut body = json!({ "schema": stored.text });
                add_kind(&mut body, &stored.kind);
                Ok(reply(StatusCode::OK, &body))
            }
            (&Method::GET, ["schemas", "ids", id, "versions"]) => {
                let state = self.state();
                let id = state.id(id)?;
                let uses: Vec<Value> = state
                    .subjects
                    .iter()
                    .flat_map(|(subject, ids)| {
                        ids.iter()
                            .enumerate()
                            .filter(move |(_, &i)| i == id)
                            .map(move |(v, _)| json!({ "subject": subject, "version": v + 1 }))
                    })
                    .collect();
                Ok(reply(StatusCode::OK, &Value::from(uses)))
            }
            (&Method::GET, ["subjects"]) => {
                let names: Vec<Value> = self.state().subjects.keys().map(|s| json!(s)).collect();
                Ok(reply(StatusCode::OK, &Value::from(names)))
            }
            (&Method::GET, ["subjects", subject, "versions"]) => {
                let state = self.state();
                let ids = state.versions(subject)?;
                let numbers: Vec<Value> = (1..=ids.len()).map(Value::from).collect();
                Ok(reply(StatusCode::OK, &Value::from(numbers)))
            }
            (&Method::GET, ["subjects", subject, "versions", version]) => {
                let found = self.state().version(subject, version)?;
                Ok(reply(StatusCode::OK, &found))
            }
            // confluent-kafka 2.16's (de)serializers ask which subject a topic is
            // bound to before they fall back to TOPIC-value.
            (&Method::GET, ["associations", "resources", _, _]) => {
                Ok(reply(StatusCode::OK, &json!([])))
            }
            // What the real registry answers at its root.
            (&Method::GET, [""]) => Ok(reply(StatusCode::OK, &json!({}))),
            _ => Err(Error::new(
                StatusCode::NOT_FOUND,
                404,
                format!("HTTP 404 Not Found: {method} {path} is not part of this stub"),
            )),
        }
    }
}

impl Handler for SchemaRegistry {
    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        match self.route(req).await {
            Ok(resp) => resp,
            Err(e) => e.into_response(),
        }
    }
}

impl State {
    fn register(&mut self, subject: &str, submitted: Submitted) -> u32 {
        let key = (submitted.kind.clone(), submitted.identity);
        let id = match self.ids.get(&key) {
            Some(&id) => id,
            None => {
                self.schemas.push(Stored {
                    text: submitted.text,
                    kind: submitted.kind,
                });
                let id = u32::try_from(self.schemas.len()).expect("fewer than 2^32 schemas");
                self.ids.insert(key, id);
                id
            }
        };
        let versions = self.subjects.entry(subject.to_owned()).or_default();
        // Registering a subject's existing schema again adds no version.
        if !versions.contains(&id) {
            versions.push(id);
        }
        id
    }

    fn lookup(&self, subject: &str, submitted: &Submitted) -> Result<Value, Error> {
        let ids = self.versions(subject)?;
        let key = (submitted.kind.clone(), submitted.identity.clone());
        let id = self.ids.get(&key).ok_or_else(Error::schema_not_found)?;
        let version = ids
            .iter()
            .position(|i| i == id)
            .ok_or_else(Error::schema_not_found)?;
        Ok(self.describe(subject, version + 1, *id))
    }

    /// The id in a path, if a schema has it.
    fn id(&self, id: &str) -> Result<u32, Error> {
        id.parse::<u32>()
            .ok()
            .filter(|&id| id >= 1 && id as usize <= self.schemas.len())
            .ok_or_else(Error::schema_not_found)
    }

    fn by_id(&self, id: &str) -> Result<&Stored, Error> {
        Ok(&self.schemas[self.id(id)? as usize - 1])
    }

    fn versions(&self, subject: &str) -> Result<&[u32], Error> {
        self.subjects
            .get(subject)
            .map(Vec::as_slice)
            .ok_or_else(|| Error::subject_not_found(subject))
    }

    /// `version` is a number from 1 or `latest` (or -1, its alias).
    fn version(&self, subject: &str, version: &str) -> Result<Value, Error> {
        let ids = self.versions(subject)?;
        let number = match version {
            "latest" | "-1" => ids.len(),
            n => match n.parse::<usize>() {
                Ok(n) if n >= 1 => n,
                _ => {
                    return Err(Error::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        42202,
                        format!(
                            "The specified version '{version}' is not a valid version id. \
                             Allowed values are between [1, 2^31-1] and the string \"latest\""
                        ),
                    ))
                }
            },
        };
        let id = *ids
            .get(number - 1)
            .ok_or_else(|| Error::version_not_found(version))?;
        Ok(self.describe(subject, number, id))
    }

    fn describe(&self, subject: &str, version: usize, id: u32) -> Value {
        let stored = &self.schemas[id as usize - 1];
        let mut body = json!({
            "subject": subject,
            "version": version,
            "id": id,
            "schema": stored.text,
        });
        add_kind(&mut body, &stored.kind);
        body
    }
}

/// Adds `schemaType` unless it is Avro, which the real registry leaves out.
fn add_kind(body: &mut Value, kind: &str) {
    if kind != "AVRO" {
        body["schemaType"] = json!(kind);
    }
}

async fn read_json(req: Request<Incoming>) -> Result<Value, Error> {
    let body: Bytes = match Limited::new(req.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(e) => return Err(Error::bad_request(format!("reading the body: {e}"))),
    };
    serde_json::from_slice(&body)
        .map_err(|e| Error::new(StatusCode::BAD_REQUEST, 50005, format!("invalid JSON: {e}")))
}

/// The schema of a register or lookup request's body. References are not
/// supported: a schema that names them is refused rather than misread.
fn parse_submitted(body: &Value) -> Result<Submitted, Error> {
    let text = body
        .get("schema")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::invalid_schema("the body has no \"schema\" string"))?;
    let kind = match body.get("schemaType") {
        None | Some(Value::Null) => "AVRO".to_owned(),
        Some(Value::String(kind)) => kind.to_ascii_uppercase(),
        Some(other) => return Err(Error::invalid_schema(format!("schemaType {other}"))),
    };
    if body
        .get("references")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty())
    {
        return Err(Error::invalid_schema(
            "schema references are not supported by this stub",
        ));
    }
    let identity = match kind.as_str() {
        // An Avro schema is JSON: a type name in quotes, a record object, or
        // a union array.
        "AVRO" | "JSON" => serde_json::from_str::<Value>(text).map_err(Error::invalid_schema)?,
        "PROTOBUF" => Value::String(text.to_owned()),
        other => return Err(Error::invalid_schema(format!("unknown schemaType {other}"))),
    };
    Ok(Submitted {
        text: text.to_owned(),
        kind,
        identity,
    })
}

/// Decodes `%XX` escapes in one path segment (a subject may hold any
/// character).
fn percent_decode(segment: &str) -> Result<String, Error> {
    let bad = || Error::bad_request(format!("bad percent-encoding in {segment:?}"));
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = segment.get(i + 1..i + 3).ok_or_else(bad)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORD: &str = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}"#;

    fn submitted(text: &str) -> Submitted {
        parse_submitted(&json!({ "schema": text })).unwrap_or_else(|e| panic!("{}", e.message))
    }

    #[test]
    fn ids_are_global_and_versions_count_per_subject() {
        let mut state = State::default();
        let a = state.register("t-value", submitted(RECORD));
        // Whitespace and key order do not make another schema.
        let reordered =
            r#"{ "name": "R", "type": "record", "fields": [{"type": "long", "name": "a"}] }"#;
        assert_eq!(state.register("t-value", submitted(reordered)), a);
        assert_eq!(state.versions("t-value").unwrap(), &[a]);
        // Another subject, same schema: same id, its own version 1.
        assert_eq!(state.register("u-value", submitted(RECORD)), a);
        let b = state.register("t-value", submitted("\"string\""));
        assert_ne!(a, b);
        assert_eq!(state.version("t-value", "latest").unwrap()["id"], json!(b));
        assert_eq!(
            state.version("t-value", "latest").unwrap()["version"],
            json!(2)
        );
        assert_eq!(
            state.version("t-value", "1").unwrap()["schema"],
            json!(RECORD)
        );
        assert_eq!(
            state.lookup("u-value", &submitted(RECORD)).unwrap()["version"],
            json!(1)
        );
        assert_eq!(
            state
                .lookup("u-value", &submitted("\"string\""))
                .unwrap_err()
                .code,
            40403
        );
        assert_eq!(state.version("t-value", "3").unwrap_err().code, 40402);
        assert_eq!(state.version("t-value", "0").unwrap_err().code, 42202);
        assert_eq!(state.version("nope", "1").unwrap_err().code, 40401);
        assert_eq!(state.by_id("3").unwrap_err().code, 40403);
        assert_eq!(state.by_id("0").unwrap_err().code, 40403);
    }

    #[test]
    fn schema_types_are_told_apart() {
        let mut state = State::default();
        let avro = state.register("s", submitted(RECORD));
        let as_json = parse_submitted(&json!({ "schema": RECORD, "schemaType": "JSON" }))
            .unwrap_or_else(|e| panic!("{}", e.message));
        let json_id = state.register("s", as_json);
        assert_ne!(avro, json_id);
        assert!(state.version("s", "1").unwrap().get("schemaType").is_none());
        assert_eq!(
            state.version("s", "2").unwrap()["schemaType"],
            json!("JSON")
        );
    }

    #[test]
    fn bad_schemas_are_refused_with_422() {
        for body in [
            json!({}),
            json!({ "schema": 3 }),
            json!({ "schema": "{not json" }),
            json!({ "schema": RECORD, "schemaType": "XML" }),
            json!({ "schema": RECORD, "references": [{"name": "x", "subject": "y", "version": 1}] }),
        ] {
            let err = parse_submitted(&body).err().expect("refused");
            assert_eq!(
                (err.status, err.code),
                (StatusCode::UNPROCESSABLE_ENTITY, 42201),
                "{body}"
            );
        }
    }

    #[test]
    fn subjects_are_percent_decoded() {
        assert_eq!(percent_decode("a%2Fb%20c").unwrap(), "a/b c");
        assert_eq!(percent_decode("plain-value").unwrap(), "plain-value");
        assert!(percent_decode("bad%2").is_err());
        assert!(percent_decode("bad%zz").is_err());
    }
}
