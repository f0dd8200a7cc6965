//! A YAML document as a tree whose every node remembers where it was written,
//! so that validation can point at the line and column of a problem.
//!
//! yaml-rust2's own `Yaml` type drops positions, so the tree is built here
//! from its event parser. Scalars stay text (with their quoting style):
//! whether `1` is a number or a string depends on what the decoder expects
//! at that place. Duplicate keys and non-scalar keys are reported while the
//! tree is built; a syntax error stops the build (YAML cannot be resumed).
//!
//! **Bounded.** An alias copies the node its anchor names, so nine nested
//! aliases in 400 bytes expand to billions of values (the "billion laughs").
//! The tree counts the values it holds, aliases expanded, and stops at
//! `MAX_VALUES` with an error at the alias that crossed it. A scenario file
//! holds one document: a second `---` is an error at its line.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A position in the source text: 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Pos {
    pub line: usize,
    pub column: usize,
}

impl Pos {
    fn from_marker(m: &Marker) -> Pos {
        Pos {
            line: m.line(),
            column: m.col() + 1,
        }
    }

    /// The position `chars` characters further on the same line.
    pub(crate) fn advance(self, chars: usize) -> Pos {
        Pos {
            line: self.line,
            column: self.column + chars,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    Plain,
    /// `'…'` or `"…"`: always a string, never a number or null.
    Quoted,
    /// `|` or `>` blocks.
    Block,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Scalar {
        value: String,
        style: Style,
        pos: Pos,
    },
    Seq {
        items: Vec<Node>,
        pos: Pos,
    },
    Map {
        entries: Vec<(Key, Node)>,
        pos: Pos,
    },
}

/// A mapping key: always a scalar here (other keys are rejected).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Key {
    pub name: String,
    pub pos: Pos,
}

impl Node {
    pub(crate) fn pos(&self) -> Pos {
        match self {
            Node::Scalar { pos, .. } | Node::Seq { pos, .. } | Node::Map { pos, .. } => *pos,
        }
    }

    /// YAML's null: `~`, `null` or nothing at all, unquoted.
    pub(crate) fn is_null(&self) -> bool {
        matches!(self, Node::Scalar { value, style: Style::Plain, .. }
            if matches!(value.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    /// The scalar text, if this is a scalar that is not null.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Node::Scalar { value, .. } if !self.is_null() => Some(value),
            _ => None,
        }
    }

    /// How the node reads in an error message's "found …" part.
    pub(crate) fn describe(&self) -> String {
        match self {
            _ if self.is_null() => "nothing".to_string(),
            Node::Scalar { value, .. } => {
                let short: String = value.chars().take(40).collect();
                if short.len() < value.len() {
                    format!("`{short}…`")
                } else {
                    format!("`{value}`")
                }
            }
            Node::Seq { .. } => "a list".to_string(),
            Node::Map { .. } => "a mapping".to_string(),
        }
    }
}

/// A problem found while building the tree.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct YamlError {
    pub pos: Pos,
    pub message: String,
}

/// What parsing produced: the root (`None` for an empty document or a syntax
/// error) and every problem found on the way.
pub(crate) struct Parsed {
    pub root: Option<Node>,
    pub errors: Vec<YamlError>,
}

enum Frame {
    Seq {
        items: Vec<Node>,
        pos: Pos,
        anchor: usize,
    },
    Map {
        entries: Vec<(Key, Node)>,
        pos: Pos,
        anchor: usize,
        /// The key waiting for its value; `Err` when the key was not a scalar
        /// (already reported: its value is dropped).
        key: Option<Result<Key, ()>>,
        /// Where each key was first written, for duplicates in O(1).
        seen: HashMap<String, Pos>,
    },
}

/// Values (scalars, lists, mappings) a document may hold once its aliases
/// are expanded: a large scenario holds a few thousand.
pub(crate) const MAX_VALUES: usize = 200_000;

/// Parses the document in `text` (a leading byte-order mark is skipped).
pub(crate) fn parse(text: &str) -> Parsed {
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let mut parser = Parser::new_from_str(text);
    let mut builder = Builder {
        stack: Vec::new(),
        anchors: Vec::new(),
        root: None,
        errors: Vec::new(),
        values: 0,
    };
    let mut documents = 0;
    loop {
        let (event, marker) = match parser.next_token() {
            Ok(next) => next,
            Err(e) => {
                builder.errors.push(YamlError {
                    pos: Pos::from_marker(e.marker()),
                    message: format!("invalid YAML: {}", e.info()),
                });
                return Parsed {
                    root: None,
                    errors: builder.errors,
                };
            }
        };
        let pos = Pos::from_marker(&marker);
        let added = match &event {
            Event::Scalar(..) | Event::SequenceStart(..) | Event::MappingStart(..) => 1,
            Event::Alias(id) => builder
                .anchors
                .iter()
                .rev()
                .find(|(anchor, _, _)| anchor == id)
                .map_or(1, |(_, _, size)| *size),
            _ => 0,
        };
        builder.values = builder.values.saturating_add(added);
        if builder.values > MAX_VALUES {
            let how = if matches!(event, Event::Alias(_)) {
                "this alias takes it past"
            } else {
                "it grows past"
            };
            builder.error(
                pos,
                format!(
                    "the document holds more than {MAX_VALUES} values once its aliases are \
                     expanded ({how} the limit): a scenario needs far fewer; do not nest \
                     aliases of aliases"
                ),
            );
            return Parsed {
                root: None,
                errors: builder.errors,
            };
        }
        match event {
            Event::StreamEnd => break,
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => {}
            Event::DocumentStart => {
                documents += 1;
                if documents > 1 {
                    builder.error(
                        pos,
                        "a second YAML document starts here: a scenario file holds one \
                         (remove this `---` and what follows, or put it in a file of its own)"
                            .to_string(),
                    );
                    break;
                }
            }
            Event::Alias(id) => {
                let node = builder
                    .anchors
                    .iter()
                    .rev()
                    .find(|(anchor, _, _)| *anchor == id)
                    .map(|(_, node, _)| node.clone());
                match node {
                    Some(node) => builder.push(node),
                    None => {
                        builder.error(pos, "unknown alias".to_string());
                        builder.push(Node::Scalar {
                            value: String::new(),
                            style: Style::Plain,
                            pos,
                        });
                    }
                }
            }
            Event::Scalar(value, style, anchor, _tag) => {
                let style = match style {
                    TScalarStyle::Plain => Style::Plain,
                    TScalarStyle::SingleQuoted | TScalarStyle::DoubleQuoted => Style::Quoted,
                    TScalarStyle::Literal | TScalarStyle::Folded => Style::Block,
                };
                let node = Node::Scalar { value, style, pos };
                builder.remember(anchor, &node);
                builder.push(node);
            }
            Event::SequenceStart(anchor, _tag) => builder.stack.push(Frame::Seq {
                items: Vec::new(),
                pos,
                anchor,
            }),
            Event::MappingStart(anchor, _tag) => builder.stack.push(Frame::Map {
                entries: Vec::new(),
                pos,
                anchor,
                key: None,
                seen: HashMap::new(),
            }),
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match builder.stack.pop() {
                    Some(Frame::Seq { items, pos, anchor }) => (Node::Seq { items, pos }, anchor),
                    Some(Frame::Map {
                        entries,
                        pos,
                        anchor,
                        ..
                    }) => {
                        // A block mapping's start marker may fall after its
                        // first key; the mapping starts at whichever is first.
                        let pos = match entries.first() {
                            Some((k, _)) if (k.pos.line, k.pos.column) < (pos.line, pos.column) => {
                                k.pos
                            }
                            _ => pos,
                        };
                        (Node::Map { entries, pos }, anchor)
                    }
                    None => break,
                };
                builder.remember(anchor, &node);
                builder.push(node);
            }
        }
    }
    Parsed {
        root: builder.root,
        errors: builder.errors,
    }
}

struct Builder {
    stack: Vec<Frame>,
    /// Anchor id, the node it names, and how many values that node holds.
    anchors: Vec<(usize, Node, usize)>,
    root: Option<Node>,
    errors: Vec<YamlError>,
    /// Values in the tree so far, aliases expanded.
    values: usize,
}

impl Builder {
    fn error(&mut self, pos: Pos, message: String) {
        self.errors.push(YamlError { pos, message });
    }

    fn remember(&mut self, anchor: usize, node: &Node) {
        if anchor != 0 {
            self.anchors
                .push((anchor, node.clone(), count_values(node)));
        }
    }

    fn push(&mut self, node: Node) {
        let mut problem = None;
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map {
                entries, key, seen, ..
            }) => match key.take() {
                None => match node {
                    Node::Scalar { value, pos, .. } => {
                        if let Some(first) = seen.get(&value) {
                            problem = Some((
                                pos,
                                format!(
                                    "duplicate key `{value}` (first defined at line {})",
                                    first.line
                                ),
                            ));
                            *key = Some(Err(()));
                        } else {
                            seen.insert(value.clone(), pos);
                            *key = Some(Ok(Key { name: value, pos }));
                        }
                    }
                    other => {
                        problem = Some((
                            other.pos(),
                            format!("expected a plain key, found {}", other.describe()),
                        ));
                        *key = Some(Err(()));
                    }
                },
                Some(Ok(k)) => entries.push((k, node)),
                Some(Err(())) => {}
            },
        }
        if let Some((pos, message)) = problem {
            self.error(pos, message);
        }
    }
}

/// Values in `node`, itself included.
fn count_values(node: &Node) -> usize {
    match node {
        Node::Scalar { .. } => 1,
        Node::Seq { items, .. } => 1 + items.iter().map(count_values).sum::<usize>(),
        Node::Map { entries, .. } => {
            1 + entries
                .iter()
                .map(|(_, v)| 1 + count_values(v))
                .sum::<usize>()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(text: &str) -> Node {
        let parsed = parse(text);
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        parsed.root.unwrap()
    }

    #[test]
    fn positions_of_keys_and_values() {
        let node = root("a: 1\nb:\n  c: 'x'\n  d: [1, 2]\n");
        let Node::Map { entries, .. } = node else {
            panic!("not a map")
        };
        assert_eq!(entries[0].0.pos, Pos { line: 1, column: 1 });
        assert_eq!(entries[0].1.pos(), Pos { line: 1, column: 4 });
        let Node::Map {
            entries: inner,
            pos,
        } = &entries[1].1
        else {
            panic!("not a map")
        };
        assert_eq!(*pos, Pos { line: 3, column: 3 });
        assert_eq!(inner[0].1.pos(), Pos { line: 3, column: 6 });
        assert_eq!(inner[1].1.pos(), Pos { line: 4, column: 6 });
    }

    #[test]
    fn an_alias_bomb_stops_at_the_limit_with_its_place() {
        // Nine levels of ten aliases each: 10^9 values if expanded.
        let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        let names = "abcdefghij".as_bytes();
        for w in names.windows(2) {
            let (prev, next) = (w[0] as char, w[1] as char);
            let refs = vec![format!("*{prev}"); 10].join(", ");
            text.push_str(&format!("{next}: &{next} [{refs}]\n"));
        }
        assert!(text.len() < 500);
        let begin = std::time::Instant::now();
        let parsed = parse(&text);
        assert!(parsed.root.is_none());
        let e = &parsed.errors[0];
        assert!(e.message.contains("more than 200000 values"), "{e:?}");
        assert!(e.pos.line >= 5 && e.pos.line <= 7, "{e:?}");
        assert!(begin.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn one_document_a_bom_and_many_keys() {
        let parsed = parse("a: 1\n---\nb: 2\n");
        assert_eq!(parsed.errors.len(), 1, "{:?}", parsed.errors);
        assert_eq!(parsed.errors[0].pos.line, 2);
        assert!(parsed.errors[0].message.contains("second YAML document"));
        // An explicit first `---` is one document.
        assert!(parse("---\na: 1\n").errors.is_empty());
        let node = root("\u{FEFF}a: 1\n");
        assert!(matches!(node, Node::Map { entries, .. } if entries[0].0.name == "a"));
        // Duplicates among many keys are found without comparing every pair.
        let mut text: String = (0..50_000).map(|i| format!("k{i}: {i}\n")).collect();
        text.push_str("k7: again\n");
        let parsed = parse(&text);
        assert_eq!(parsed.errors.len(), 1);
        assert!(parsed.errors[0].message.contains("first defined at line 8"));
    }

    #[test]
    fn duplicate_keys_are_reported() {
        let parsed = parse("a: 1\nb: 2\na: 3\n");
        assert_eq!(parsed.errors.len(), 1);
        assert_eq!(parsed.errors[0].pos, Pos { line: 3, column: 1 });
        assert!(parsed.errors[0].message.contains("duplicate key `a`"));
        assert!(parsed.errors[0].message.contains("line 1"));
    }

    #[test]
    fn syntax_error_has_a_position() {
        let parsed = parse("a: [1, 2\nb: 3\n");
        assert!(parsed.root.is_none());
        assert_eq!(parsed.errors.len(), 1);
        assert!(parsed.errors[0].message.starts_with("invalid YAML"));
        assert!(parsed.errors[0].pos.line >= 1);
    }

    #[test]
    fn aliases_are_copied() {
        let node = root("a: &x {k: v}\nb: *x\n");
        let Node::Map { entries, .. } = node else {
            panic!("not a map")
        };
        assert!(matches!(entries[1].1, Node::Map { .. }));
    }

    #[test]
    fn null_and_quoted() {
        let node = root("a:\nb: ~\nc: 'null'\n");
        let Node::Map { entries, .. } = node else {
            panic!("not a map")
        };
        assert!(entries[0].1.is_null());
        assert!(entries[1].1.is_null());
        assert!(!entries[2].1.is_null());
    }
}
