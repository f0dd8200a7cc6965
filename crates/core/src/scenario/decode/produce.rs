//! `produce: {topic, key, value}`: a request that sends one record to a
//! Kafka topic, its value JSON, raw text or Avro (`avro.rs`).

use std::path::Path;

use super::super::model::*;
use super::super::template::{Builder, Escape, Names};
use super::super::yaml::Node;
use super::body::json_body;
use super::ctx::{template, Ctx};

pub(crate) const PRODUCE_KEYS: &[&str] = &["topic", "key", "value"];
pub(crate) const VALUE_KEYS: &[&str] = &["json", "raw", "avro"];

/// `produce: {topic, key, value}`.
pub(super) fn decode_produce(
    ctx: &mut Ctx,
    name: &str,
    node: &Node,
    names: &Names,
    base_dir: &Path,
) -> Option<Request> {
    let fields = ctx.map(
        node,
        &format!("`produce` of request `{name}`"),
        PRODUCE_KEYS,
    )?;
    let errors_before = ctx.errors.len();
    let topic = fields.required(ctx, "topic").and_then(|n| {
        let topic = ctx.setting(n, "a topic name")?;
        // Kafka's rule for topic names.
        let ok = !topic.is_empty()
            && topic.len() <= 249
            && topic != "."
            && topic != ".."
            && topic
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if !ok {
            ctx.error(
                n.pos(),
                format!(
                    "expected a topic name of letters, digits, `.`, `_` or `-`, found `{topic}`"
                ),
            );
        }
        ok.then_some(topic)
    });
    let key = fields.get("key").and_then(|n| {
        let text = ctx.string(n, "a key template")?;
        template(ctx, n, &text, Escape::None, Escape::None, names)
    });
    let value = fields.required(ctx, "value").and_then(|n| {
        let what = "`value` (one of `json`, `raw` or `avro`)";
        let value_fields = ctx.map(n, what, VALUE_KEYS)?;
        if value_fields.entries.len() != 1 {
            ctx.error(
                value_fields.pos,
                format!(
                    "expected exactly one of `json`, `raw` or `avro` in `value`, found {} keys",
                    value_fields.entries.len()
                ),
            );
            return None;
        }
        let (kind, v) = &value_fields.entries[0];
        match kind.name.as_str() {
            "json" => {
                let mut b = Builder::new(Escape::Json);
                json_body(ctx, v, &mut b, names);
                Some(RecordValue::Json(b.finish()))
            }
            "raw" => ctx
                .string(v, "a value text")
                .and_then(|text| template(ctx, v, &text, Escape::None, Escape::None, names))
                .map(RecordValue::Raw),
            "avro" => super::avro::decode_avro(ctx, v, names, base_dir, topic.as_deref())
                .map(RecordValue::Avro),
            _ => None, // reported by `map`
        }
    });
    if ctx.errors.len() > errors_before {
        return None;
    }
    Some(Request {
        name: name.to_string(),
        action: Action::Produce(Produce {
            topic: topic?,
            key,
            value: value?,
        }),
        extracts: Vec::new(),
        checks: Vec::new(),
        think_time: None,
        sets: Vec::new(),
        skip_if: None,
    })
}
