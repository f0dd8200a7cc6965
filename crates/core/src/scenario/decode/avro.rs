//! Decoding of `value: {avro: …}`: the schema (inline YAML or a `.avsc`
//! file), parsed by apache-avro, and the record template compiled against
//! it, so `autoperf check` finds a misspelt field, a missing one or a text
//! that cannot be a `long` before anything runs.

use std::collections::HashMap;
use std::path::Path;

use apache_avro::schema::{Name, ResolvedSchema, UuidSchema};
use apache_avro::Schema;

use super::super::avro::{bytes, encode_text, zigzag, AvroTemplate, Leaf, LeafKind};
use super::super::diagnostic::did_you_mean;
use super::super::files;
use super::super::model::{AvroFraming, AvroValue};
use super::super::template::{Builder, Escape, Names};
use super::super::yaml::{Node, Style};
use super::ctx::Ctx;
use super::url::parse_plain_base_url;

pub(crate) const AVRO_KEYS: &[&str] = &["schema", "schema_file", "registry", "schema_id", "record"];
pub(crate) const REGISTRY_KEYS: &[&str] = &["url", "subject"];

pub(crate) fn decode_avro(
    ctx: &mut Ctx,
    node: &Node,
    names: &Names,
    base_dir: &Path,
    topic: Option<&str>,
) -> Option<AvroValue> {
    let fields = ctx.map(node, "`avro`", AVRO_KEYS)?;
    let errors_before = ctx.errors.len();
    let schema_json = match (fields.get("schema"), fields.get("schema_file")) {
        (Some(_), Some(_)) => {
            let key = fields.key("schema_file").map_or(fields.pos, |k| k.pos);
            ctx.error(
                key,
                "expected one of `schema` or `schema_file` in `avro`, found both",
            );
            None
        }
        (Some(inline), None) => Some((inline, yaml_to_json(inline, false).to_string())),
        (None, Some(file)) => ctx
            .setting(file, "a schema file path")
            .and_then(|relative| {
                let path = base_dir.join(&relative);
                let read = files::read_bounded(&path, files::SMALL_FILE_LIMIT, "Avro schema")
                    .and_then(|b| {
                        String::from_utf8(b).map_err(|_| {
                            format!(
                                "cannot read Avro schema `{}`: not UTF-8 text",
                                path.display()
                            )
                        })
                    });
                match read {
                    Ok(text) => Some((file, text)),
                    Err(e) => {
                        ctx.error(file.pos(), e);
                        None
                    }
                }
            }),
        (None, None) => {
            ctx.error(
                fields.pos,
                "missing required key `schema` (or `schema_file`) in `avro`",
            );
            None
        }
    };
    let schema = schema_json.as_ref().and_then(|(node, text)| {
        Schema::parse_str(text)
            .map_err(|e| ctx.error(node.pos(), format!("expected a valid Avro schema: {e}")))
            .ok()
    });

    let framing = match (fields.get("registry"), fields.get("schema_id")) {
        (Some(_), Some(_)) => {
            let key = fields.key("schema_id").map_or(fields.pos, |k| k.pos);
            ctx.error(
                key,
                "expected one of `registry` or `schema_id` in `avro`, found both",
            );
            None
        }
        (Some(registry), None) => decode_registry(ctx, registry, topic),
        (None, Some(node)) => ctx
            .integer(node, 0, "a schema id (a whole number)")
            .and_then(|id| {
                u32::try_from(id)
                    .map_err(|_| ctx.error(node.pos(), "expected a schema id below 2^32"))
                    .ok()
            })
            .map(AvroFraming::SchemaId),
        (None, None) => Some(AvroFraming::Bare),
    };

    let record_node = fields.required(ctx, "record");
    let record = match (&schema, record_node) {
        (Some(schema), Some(node)) => match ResolvedSchema::new(schema) {
            Ok(resolved) => {
                let mut c = Compiler {
                    ctx,
                    names,
                    refs: resolved.get_names(),
                    literal: Vec::new(),
                    leaves: Vec::new(),
                };
                c.value(node, schema, 0);
                Some(AvroTemplate {
                    literal: c.literal,
                    leaves: c.leaves,
                })
            }
            Err(e) => {
                let pos = schema_json.as_ref().map_or(fields.pos, |(n, _)| n.pos());
                ctx.error(pos, format!("expected a valid Avro schema: {e}"));
                None
            }
        },
        _ => None,
    };
    if ctx.errors.len() > errors_before {
        return None;
    }
    Some(AvroValue {
        schema_json: schema_json?.1,
        record: record?,
        framing: framing?,
    })
}

fn decode_registry(ctx: &mut Ctx, node: &Node, topic: Option<&str>) -> Option<AvroFraming> {
    let fields = ctx.map(node, "`registry`", REGISTRY_KEYS)?;
    let url = fields.required(ctx, "url").and_then(|n| {
        let text = ctx.setting(n, "a registry URL like `http://127.0.0.1:8081`")?;
        parse_plain_base_url(&text)
            .map_err(|e| ctx.error(n.pos(), e.replace("a base URL", "a registry URL")))
            .ok()
    });
    // Confluent's default subject naming (TopicNameStrategy).
    let subject = match fields.get("subject") {
        Some(n) => ctx.string(n, "a subject name like `input-value`"),
        None => topic.map(|t| format!("{t}-value")),
    };
    Some(AvroFraming::Registry {
        url: url?,
        subject: subject?,
    })
}

/// An inline YAML schema as JSON: plain scalars that read as numbers or
/// booleans become those; everything else a string. A plain `null` is the
/// type name `"null"` (`type: [null, string]`), except as a field's
/// `default`, where it is JSON's null.
fn yaml_to_json(node: &Node, in_default: bool) -> serde_json::Value {
    use serde_json::Value;
    match node {
        Node::Map { entries, .. } => Value::Object(
            entries
                .iter()
                .map(|(k, v)| {
                    let json = yaml_to_json(v, in_default || k.name == "default");
                    (k.name.clone(), json)
                })
                .collect(),
        ),
        Node::Seq { items, .. } => Value::Array(
            items
                .iter()
                .map(|item| yaml_to_json(item, in_default))
                .collect(),
        ),
        Node::Scalar { value, style, .. } => {
            if *style == Style::Plain {
                if node.is_null() {
                    return if in_default {
                        Value::Null
                    } else {
                        Value::String("null".into())
                    };
                }
                match value.as_str() {
                    "true" => return Value::Bool(true),
                    "false" => return Value::Bool(false),
                    _ => {}
                }
                if let Ok(n) = value.parse::<serde_json::Number>() {
                    return Value::Number(n);
                }
            }
            Value::String(value.clone())
        }
    }
}

/// Deeper than any sensible record; stops a recursive schema fed a
/// recursive YAML anchor from going on forever.
const MAX_DEPTH: usize = 64;

struct Compiler<'c, 'a, 'n, 's> {
    ctx: &'c mut Ctx<'a>,
    names: &'c Names<'n>,
    refs: &'c HashMap<Name, &'s Schema>,
    literal: Vec<u8>,
    leaves: Vec<Leaf>,
}

impl Compiler<'_, '_, '_, '_> {
    fn error(&mut self, node: &Node, message: String) {
        self.ctx.error(node.pos(), message);
    }

    /// Compiles `node` as a value of `schema`.
    fn value(&mut self, node: &Node, schema: &Schema, depth: usize) {
        if depth > MAX_DEPTH {
            return self.error(node, "expected an Avro value nested less deeply".into());
        }
        let leaf = match schema {
            Schema::Null => {
                if !node.is_null() {
                    self.error(
                        node,
                        format!("expected null (Avro `null`), found {}", node.describe()),
                    );
                }
                return;
            }
            Schema::Boolean => LeafKind::Boolean,
            Schema::Int | Schema::Date | Schema::TimeMillis => LeafKind::Int,
            Schema::Long
            | Schema::TimeMicros
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos => LeafKind::Long,
            Schema::Float => LeafKind::Float,
            Schema::Double => LeafKind::Double,
            Schema::String | Schema::Uuid(UuidSchema::String) => LeafKind::String,
            Schema::Bytes | Schema::Uuid(UuidSchema::Bytes) => LeafKind::Bytes,
            Schema::Enum(e) => LeafKind::Enum(e.symbols.clone()),
            Schema::Fixed(f) => LeafKind::Fixed(f.size),
            Schema::Uuid(UuidSchema::Fixed(f)) => LeafKind::Fixed(f.size),
            Schema::Record(record) => {
                let name = record.name.name().to_string();
                let Node::Map { entries, .. } = node else {
                    return self.error(
                        node,
                        format!(
                            "expected a mapping for Avro record `{name}`, found {}",
                            node.describe()
                        ),
                    );
                };
                let known: Vec<&str> = record.fields.iter().map(|f| f.name.as_str()).collect();
                for (key, _) in entries {
                    if !known.contains(&key.name.as_str()) {
                        let hint = did_you_mean(&key.name, known.iter().copied())
                            .or_else(|| Some(format!("its fields are: {}", known.join(", "))));
                        self.ctx.error_hint(
                            key.pos,
                            format!("unknown field `{}` in Avro record `{name}`", key.name),
                            hint,
                        );
                    }
                }
                // Avro writes a record's fields in schema order, whatever
                // order the YAML has them in.
                for field in &record.fields {
                    match entries.iter().find(|(k, _)| k.name == field.name) {
                        Some((_, value)) => self.value(value, &field.schema, depth + 1),
                        None => self.error(
                            node,
                            format!("missing field `{}` of Avro record `{name}`", field.name),
                        ),
                    }
                }
                return;
            }
            Schema::Array(array) => {
                let Node::Seq { items, .. } = node else {
                    return self.error(
                        node,
                        format!("expected a list (Avro array), found {}", node.describe()),
                    );
                };
                if !items.is_empty() {
                    zigzag(items.len() as i64, &mut self.literal);
                    for item in items {
                        self.value(item, &array.items, depth + 1);
                    }
                }
                self.literal.push(0);
                return;
            }
            Schema::Map(map) => {
                let Node::Map { entries, .. } = node else {
                    return self.error(
                        node,
                        format!("expected a mapping (Avro map), found {}", node.describe()),
                    );
                };
                if !entries.is_empty() {
                    zigzag(entries.len() as i64, &mut self.literal);
                    for (key, value) in entries {
                        bytes(key.name.as_bytes(), &mut self.literal);
                        self.value(value, &map.types, depth + 1);
                    }
                }
                self.literal.push(0);
                return;
            }
            Schema::Union(union) => return self.union(node, union.variants(), depth),
            Schema::Ref { name } => match self.refs.get(name) {
                Some(schema) => return self.value(node, schema, depth + 1),
                None => {
                    return self.error(
                        node,
                        format!("expected a defined Avro type, found a reference to `{name}`"),
                    )
                }
            },
            Schema::Decimal(_) | Schema::BigDecimal | Schema::Duration(_) => {
                return self.error(
                    node,
                    "Avro `decimal` and `duration` values are not supported in record templates"
                        .into(),
                );
            }
        };
        self.scalar(node, leaf);
    }

    /// A union: null takes the `null` branch; anything else the first other
    /// branch it compiles as, chosen now, so the branch index is a literal.
    fn union(&mut self, node: &Node, variants: &[Schema], depth: usize) {
        if node.is_null() {
            match variants.iter().position(|v| matches!(v, Schema::Null)) {
                Some(i) => zigzag(i as i64, &mut self.literal),
                None => self.error(
                    node,
                    "expected a value for an Avro union without `null`, found null".into(),
                ),
            }
            return;
        }
        for (i, variant) in variants.iter().enumerate() {
            if matches!(variant, Schema::Null) {
                continue;
            }
            let (literal, leaves, errors) =
                (self.literal.len(), self.leaves.len(), self.ctx.errors.len());
            zigzag(i as i64, &mut self.literal);
            self.value(node, variant, depth + 1);
            if self.ctx.errors.len() == errors {
                return;
            }
            self.literal.truncate(literal);
            self.leaves.truncate(leaves);
            self.ctx.errors.truncate(errors);
        }
        self.error(
            node,
            format!(
                "expected a value of one of the Avro union's types, found {}",
                node.describe()
            ),
        );
    }

    /// A scalar: encoded now when it has no expansion, else a leaf.
    fn scalar(&mut self, node: &Node, kind: LeafKind) {
        let Node::Scalar { value, .. } = node else {
            return self.error(
                node,
                format!("expected {}, found {}", describe(&kind), node.describe()),
            );
        };
        let mut b = Builder::new(Escape::None);
        let errors = b.source(value, Escape::None, self.names);
        if !errors.is_empty() {
            super::ctx::report(self.ctx, node, value, errors);
            return;
        }
        let template = b.finish();
        match template.static_bytes() {
            Some(text) => {
                if encode_text(&kind, text, &mut self.literal).is_err() {
                    self.error(
                        node,
                        format!("expected {}, found `{value}`", describe(&kind)),
                    );
                }
            }
            None => self.leaves.push(Leaf {
                at: self.literal.len(),
                template,
                kind,
            }),
        }
    }
}

fn describe(kind: &LeafKind) -> String {
    match kind {
        LeafKind::Boolean => "`true` or `false` (Avro boolean)".into(),
        LeafKind::Int => "a 32-bit integer (Avro int)".into(),
        LeafKind::Long => "an integer (Avro long)".into(),
        LeafKind::Float => "a number (Avro float)".into(),
        LeafKind::Double => "a number (Avro double)".into(),
        LeafKind::String => "a string (Avro string)".into(),
        LeafKind::Bytes => "a string (Avro bytes)".into(),
        LeafKind::Enum(symbols) => {
            format!("one of the Avro enum's symbols ({})", symbols.join(", "))
        }
        LeafKind::Fixed(n) => format!("exactly {n} bytes (Avro fixed)"),
    }
}
