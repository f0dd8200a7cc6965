//! A YAML document as a tree whose every node remembers where it was written,
//! so that validation can point at the line and column of a problem.
//!
//! yaml-rust2's own `Yaml` type drops positions, so the tree is built here
//! from its event parser. Scalars stay text (with their quoting style):
//! whether `1` is a number or a string depends on what the decoder expects
//! at that place. Duplicate keys and non-scalar keys are reported while the
//! tree is built; a syntax error stops the build (YAML cannot be resumed).

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A position in the source text: 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
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
    pub fn advance(self, chars: usize) -> Pos {
        Pos {
            line: self.line,
            column: self.column + chars,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Plain,
    /// `'…'` or `"…"`: always a string, never a number or null.
    Quoted,
    /// `|` or `>` blocks.
    Block,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
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
pub struct Key {
    pub name: String,
    pub pos: Pos,
}

impl Node {
    pub fn pos(&self) -> Pos {
        match self {
            Node::Scalar { pos, .. } | Node::Seq { pos, .. } | Node::Map { pos, .. } => *pos,
        }
    }

    /// YAML's null: `~`, `null` or nothing at all, unquoted.
    pub fn is_null(&self) -> bool {
        matches!(self, Node::Scalar { value, style: Style::Plain, .. }
            if matches!(value.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    /// The scalar text, if this is a scalar that is not null.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Scalar { value, .. } if !self.is_null() => Some(value),
            _ => None,
        }
    }

    /// How the node reads in an error message's "found …" part.
    pub fn describe(&self) -> String {
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
pub struct YamlError {
    pub pos: Pos,
    pub message: String,
}

/// What parsing produced: the root (`None` for an empty document or a syntax
/// error) and every problem found on the way.
pub struct Parsed {
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
    },
}

/// Parses the first document of `text`.
pub fn parse(text: &str) -> Parsed {
    let mut parser = Parser::new_from_str(text);
    let mut builder = Builder {
        stack: Vec::new(),
        anchors: Vec::new(),
        root: None,
        errors: Vec::new(),
    };
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
        match event {
            Event::StreamEnd | Event::DocumentEnd => break,
            Event::Nothing | Event::StreamStart | Event::DocumentStart => {}
            Event::Alias(id) => {
                let node = builder
                    .anchors
                    .iter()
                    .rev()
                    .find(|(anchor, _)| *anchor == id)
                    .map(|(_, node)| node.clone());
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
    anchors: Vec<(usize, Node)>,
    root: Option<Node>,
    errors: Vec<YamlError>,
}

impl Builder {
    fn error(&mut self, pos: Pos, message: String) {
        self.errors.push(YamlError { pos, message });
    }

    fn remember(&mut self, anchor: usize, node: &Node) {
        if anchor != 0 {
            self.anchors.push((anchor, node.clone()));
        }
    }

    fn push(&mut self, node: Node) {
        let mut problem = None;
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, key, .. }) => match key.take() {
                None => match node {
                    Node::Scalar { value, pos, .. } => {
                        if let Some((first, _)) = entries.iter().find(|(k, _)| k.name == value) {
                            problem = Some((
                                pos,
                                format!(
                                    "duplicate key `{value}` (first defined at line {})",
                                    first.pos.line
                                ),
                            ));
                            *key = Some(Err(()));
                        } else {
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
