//! `--set KEY=VALUE`: scenario values from the command line (JMeter's
//! `-J`, k6's `-e`), applied to the located tree before it is decoded, so
//! an overridden value is validated exactly like one written in the file.
//! KEY is a path of mapping keys (and list indices) joined by dots —
//! `think_time`, `target.base_url`, `requests.login.path`,
//! `capacity.max_error_rate`, `thresholds.0` — created when missing. VALUE
//! is YAML: `200ms`, or `{exponential: 200ms}` for a mapping. Nodes that
//! came from `--set` number N sit at line 0, column N, which messages turn
//! into `--set KEY=VALUE: …`.

use super::yaml::{self, Key, Node, Pos};

/// One `--set`, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    /// As given: `think_time=200ms`.
    pub text: String,
    pub path: Vec<String>,
    pub value: String,
}

impl Override {
    pub fn parse(text: &str) -> Result<Override, String> {
        let Some((key, value)) = text.split_once('=') else {
            return Err(format!(
                "`{text}`: expected KEY=VALUE, e.g. think_time=200ms"
            ));
        };
        let path: Vec<String> = key.split('.').map(|s| s.trim().to_string()).collect();
        if path.iter().any(String::is_empty) {
            return Err(format!(
                "`{text}`: expected a key like `think_time` or `target.base_url`, found `{key}`"
            ));
        }
        Ok(Override {
            text: text.to_string(),
            path,
            value: value.to_string(),
        })
    }
}

/// Applies every override in order to `root`; problems as (position, message).
pub(crate) fn apply(root: &mut Node, overrides: &[Override]) -> Vec<(Pos, String)> {
    let mut errors = Vec::new();
    for (i, o) in overrides.iter().enumerate() {
        let at = Pos {
            line: 0,
            column: i + 1,
        };
        let parsed = yaml::parse(&o.value);
        if let Some(e) = parsed.errors.first() {
            errors.push((at, format!("the value is not YAML: {}", e.message)));
            continue;
        }
        let mut value = parsed.root.unwrap_or(Node::Scalar {
            value: String::new(),
            style: yaml::Style::Plain,
            pos: at,
        });
        relocate(&mut value, at);
        if let Err(e) = set(root, &o.path, value, at) {
            errors.push((at, e));
        }
    }
    errors
}

fn set(node: &mut Node, path: &[String], value: Node, at: Pos) -> Result<(), String> {
    let (first, rest) = path.split_first().expect("a path has a key");
    let slot = match node {
        Node::Map { entries, .. } => {
            let index = match entries.iter().position(|(k, _)| &k.name == first) {
                Some(index) => index,
                None => {
                    let placeholder = Node::Map {
                        entries: Vec::new(),
                        pos: at,
                    };
                    let key = Key {
                        name: first.clone(),
                        pos: at,
                    };
                    entries.push((key, placeholder));
                    entries.len() - 1
                }
            };
            &mut entries[index].1
        }
        Node::Seq { items, .. } => {
            let len = items.len();
            match first.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                Some(item) => item,
                None => {
                    return Err(format!(
                        "`{first}` is not an index of the list there (0 to {})",
                        len.saturating_sub(1)
                    ))
                }
            }
        }
        Node::Scalar { .. } => {
            return Err(format!(
                "cannot set `{first}` inside {}, which is not a mapping",
                node.describe()
            ))
        }
    };
    if rest.is_empty() {
        *slot = value;
        Ok(())
    } else {
        if slot.is_null() {
            *slot = Node::Map {
                entries: Vec::new(),
                pos: at,
            };
        }
        set(slot, rest, value, at)
    }
}

/// Gives every node of a value the position of its `--set`.
fn relocate(node: &mut Node, at: Pos) {
    match node {
        Node::Scalar { pos, .. } => *pos = at,
        Node::Seq { items, pos } => {
            *pos = at;
            items.iter_mut().for_each(|n| relocate(n, at));
        }
        Node::Map { entries, pos } => {
            *pos = at;
            for (k, v) in entries {
                k.pos = at;
                relocate(v, at);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(text: &str) -> Node {
        yaml::parse(text).root.unwrap()
    }

    fn get<'a>(node: &'a Node, key: &str) -> &'a Node {
        match node {
            Node::Map { entries, .. } => &entries.iter().find(|(k, _)| k.name == key).unwrap().1,
            _ => panic!("not a map"),
        }
    }

    #[test]
    fn values_replace_nested_keys_and_missing_ones_are_made() {
        let mut root = tree("think_time: 1s\ntarget: {base_url: \"http://a\"}\n");
        let sets = [
            Override::parse("think_time=200ms").unwrap(),
            Override::parse("target.base_url=http://b:1").unwrap(),
            Override::parse("capacity.max_error_rate=10%").unwrap(),
            Override::parse("session={start: x}").unwrap(),
        ];
        assert!(apply(&mut root, &sets).is_empty());
        assert_eq!(get(&root, "think_time").as_str(), Some("200ms"));
        assert_eq!(
            get(get(&root, "target"), "base_url").as_str(),
            Some("http://b:1")
        );
        assert_eq!(
            get(get(&root, "capacity"), "max_error_rate").as_str(),
            Some("10%")
        );
        let start = get(get(&root, "session"), "start");
        assert_eq!(start.as_str(), Some("x"));
        assert_eq!(
            start.pos(),
            Pos { line: 0, column: 4 },
            "marked as the fourth --set"
        );
    }

    #[test]
    fn wrong_paths_and_values_are_explained() {
        assert!(Override::parse("think_time")
            .unwrap_err()
            .contains("KEY=VALUE"));
        assert!(Override::parse("a..b=1")
            .unwrap_err()
            .contains("expected a key"));
        let mut root = tree("think_time: 1s\nthresholds: [\"p99 < 1s\"]\n");
        let errors = apply(
            &mut root,
            &[
                Override::parse("think_time.x=1").unwrap(),
                Override::parse("thresholds.3=p50 < 1s").unwrap(),
                Override::parse("name={a: [}").unwrap(),
            ],
        );
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].1.contains("not a mapping"), "{errors:?}");
        assert!(errors[1].1.contains("not an index"), "{errors:?}");
        assert!(errors[2].1.contains("not YAML"), "{errors:?}");
    }
}
