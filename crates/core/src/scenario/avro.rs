//! Avro record templates: a YAML record whose scalars are templates,
//! compiled against an Avro schema (by `decode::avro`) into the Avro binary
//! encoding with holes, and rendered per request straight to bytes — no
//! JSON text or generic Avro value in between.
//!
//! Everything the schema fixes at load time is encoded once into `literal`:
//! record framing (none in Avro), union branch indices, array and map
//! block counts (the YAML gives their lengths), and every scalar without an
//! expansion. Only scalars with an expansion are encoded per request, each
//! by its leaf's type:
//!
//! ```text
//!  literal: [ 0x02 'a' ][        ][ 0x00 ][        ]
//!  leaves:            ^ at: string  ^ at: long   (rendered, parsed, encoded)
//! ```

use std::io::Write as _;

use super::template::{Bindings, Dynamic, Template};

/// A record template ready to render as Avro binary.
#[derive(Debug, Clone, PartialEq)]
pub struct AvroTemplate {
    pub(crate) literal: Vec<u8>,
    pub(crate) leaves: Vec<Leaf>,
}

/// A scalar with expansions: rendered as text, then encoded as `kind`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Leaf {
    /// Offset in `literal` where its encoding goes.
    pub at: usize,
    pub template: Template,
    pub kind: LeafKind,
}

/// The Avro types a text can be encoded as.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LeafKind {
    Boolean,
    Int,
    Long,
    Float,
    Double,
    String,
    Bytes,
    /// The symbols, in order: the text must be one of them.
    Enum(Vec<String>),
    /// Exactly this many bytes.
    Fixed(usize),
}

/// A rendered text that does not fit its Avro type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EncodeError;

impl AvroTemplate {
    /// The templates of its fields.
    pub(crate) fn templates(&self) -> impl Iterator<Item = &Template> {
        self.leaves.iter().map(|l| &l.template)
    }

    /// Appends the Avro binary encoding of one rendering to `out`;
    /// `scratch` holds each leaf's text on the way.
    pub(crate) fn render(
        &self,
        bindings: &mut impl Bindings,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        let mut from = 0;
        for leaf in &self.leaves {
            out.extend_from_slice(&self.literal[from..leaf.at]);
            from = leaf.at;
            if encode_number(leaf, bindings, out)? {
                continue;
            }
            scratch.clear();
            leaf.template
                .render(bindings, scratch)
                .map_err(|_| EncodeError)?;
            encode_text(&leaf.kind, scratch, out)?;
        }
        out.extend_from_slice(&self.literal[from..]);
        Ok(())
    }
}

/// A numeric leaf whose template is one numeric expression, encoded from
/// the number itself, exactly as its text would be; false when the leaf is
/// not one of those (nothing drawn then).
fn encode_number(
    leaf: &Leaf,
    bindings: &mut impl Bindings,
    out: &mut Vec<u8>,
) -> Result<bool, EncodeError> {
    let Some(dynamic) = leaf.template.only_dynamic() else {
        return Ok(false);
    };
    let value = match dynamic {
        Dynamic::Random { lo, hi } => Ok(bindings.random(lo, hi)),
        Dynamic::NowMs => Ok(bindings.now_ms()),
        Dynamic::RandomFloat { lo, hi } => Err(lo + (hi - lo) * bindings.unit()),
        Dynamic::Column { .. } | Dynamic::Var(_) | Dynamic::Expr(_) => return Ok(false),
    };
    match (&leaf.kind, value) {
        (LeafKind::Long, Ok(n)) => zigzag(n, out),
        (LeafKind::Int, Ok(n)) => zigzag(i32::try_from(n).map_err(|_| EncodeError)?.into(), out),
        (LeafKind::Double, Ok(n)) => out.extend_from_slice(&(n as f64).to_le_bytes()),
        (LeafKind::Double, Err(x)) => out.extend_from_slice(&x.to_le_bytes()),
        (LeafKind::Float, Ok(n)) => out.extend_from_slice(&(n as f32).to_le_bytes()),
        (LeafKind::Float, Err(x)) => out.extend_from_slice(&(x as f32).to_le_bytes()),
        // A fraction where a whole number goes, a number for a string…:
        // the text says what a user would see.
        (kind, value) => {
            let text = match value {
                Ok(n) => n.to_string(),
                Err(x) => x.to_string(),
            };
            encode_text(kind, text.as_bytes(), out)?;
        }
    }
    Ok(true)
}

/// Encodes `text` as an Avro value of type `kind`, appending it to `out`.
pub(crate) fn encode_text(
    kind: &LeafKind,
    text: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let number = || {
        std::str::from_utf8(text)
            .map(str::trim)
            .map_err(|_| EncodeError)
    };
    match kind {
        LeafKind::Boolean => out.push(match text {
            b"true" => 1,
            b"false" => 0,
            _ => return Err(EncodeError),
        }),
        LeafKind::Int => {
            let n: i32 = number()?.parse().map_err(|_| EncodeError)?;
            zigzag(n as i64, out);
        }
        LeafKind::Long => zigzag(number()?.parse().map_err(|_| EncodeError)?, out),
        LeafKind::Float => {
            let x: f32 = number()?.parse().map_err(|_| EncodeError)?;
            out.extend_from_slice(&x.to_le_bytes());
        }
        LeafKind::Double => {
            let x: f64 = number()?.parse().map_err(|_| EncodeError)?;
            out.extend_from_slice(&x.to_le_bytes());
        }
        LeafKind::String => {
            std::str::from_utf8(text).map_err(|_| EncodeError)?;
            bytes(text, out);
        }
        LeafKind::Bytes => bytes(text, out),
        LeafKind::Enum(symbols) => {
            let i = symbols
                .iter()
                .position(|s| s.as_bytes() == text)
                .ok_or(EncodeError)?;
            zigzag(i as i64, out);
        }
        LeafKind::Fixed(size) => {
            if text.len() != *size {
                return Err(EncodeError);
            }
            out.extend_from_slice(text);
        }
    }
    Ok(())
}

/// Avro's `long`/`int` encoding: zig-zag, then a base-128 varint.
pub(crate) fn zigzag(n: i64, out: &mut Vec<u8>) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Avro `bytes`/`string`: the length, then the bytes.
pub(crate) fn bytes(b: &[u8], out: &mut Vec<u8>) {
    zigzag(b.len() as i64, out);
    let _ = out.write_all(b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_matches_the_spec_table() {
        // Avro specification, "Binary Encoding": 0→00, -1→01, 1→02, -2→03,
        // 2→04, -64→7f, 64→80 01.
        for (n, want) in [
            (0, &[0x00][..]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (-2, &[0x03]),
            (2, &[0x04]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (
                i64::MIN,
                &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ] {
            let mut out = Vec::new();
            zigzag(n, &mut out);
            assert_eq!(out, want, "{n}");
        }
    }

    #[test]
    fn texts_by_kind() {
        let enc = |kind: LeafKind, text: &str| {
            let mut out = Vec::new();
            encode_text(&kind, text.as_bytes(), &mut out).map(|_| out)
        };
        assert_eq!(enc(LeafKind::Long, "1700000000000").unwrap().len(), 6);
        assert_eq!(enc(LeafKind::Int, " -2 "), Ok(vec![0x03]));
        assert_eq!(enc(LeafKind::Int, "4294967296"), Err(EncodeError));
        assert_eq!(
            enc(LeafKind::Double, "1.5"),
            Ok(1.5f64.to_le_bytes().to_vec())
        );
        assert_eq!(enc(LeafKind::Float, "x"), Err(EncodeError));
        assert_eq!(enc(LeafKind::String, "s_1"), Ok(b"\x06s_1".to_vec()));
        assert_eq!(enc(LeafKind::Boolean, "true"), Ok(vec![1]));
        let e = LeafKind::Enum(vec!["A".into(), "B".into()]);
        assert_eq!(enc(e.clone(), "B"), Ok(vec![0x02]));
        assert_eq!(enc(e, "C"), Err(EncodeError));
        assert_eq!(enc(LeafKind::Fixed(2), "ab"), Ok(b"ab".to_vec()));
        assert_eq!(enc(LeafKind::Fixed(2), "abc"), Err(EncodeError));
    }
}
