//! Request classes: URLs grouped by path template, the method kept apart.
//! `/post/123` and `/post/456` are the class `post` with a parameter.
//!
//! A first pass over the log learns the templates in a trie of path
//! segments per method. A segment that looks like an identifier (digits, a
//! UUID, a long hex or mixed token) is a parameter at once; a position
//! that shows more than `MAX_LITERALS` distinct words (slugs, user names)
//! is folded into a parameter too, its subtrees merged. Memory stays
//! bounded by that cap and a global node budget, whatever the log's size.
//! The second pass maps each request onto the learned templates.

use std::collections::{BTreeMap, HashMap, HashSet};

/// Distinct literal words one position may show before it is a parameter.
const MAX_LITERALS: usize = 40;
/// Nodes kept in all; past it, new words are parameters.
const MAX_NODES: usize = 200_000;
/// Deeper segments are folded into the last one.
const MAX_DEPTH: usize = 16;
/// Methods learned; requests with others are left out (counted).
const MAX_METHODS: usize = 64;

#[derive(Default)]
struct Node {
    /// Requests whose path ends here.
    end: u64,
    /// Its template's place in `walk`'s order (set by `finish`).
    id: usize,
    literals: HashMap<String, Node>,
    param: Option<Box<Node>>,
    /// Too many distinct words came here: every word is a parameter.
    folded: bool,
}

impl Node {
    fn size(&self) -> usize {
        1 + self.literals.values().map(Node::size).sum::<usize>()
            + self.param.as_ref().map_or(0, |p| p.size())
    }

    /// Takes `other`'s counts and subtrees into `self`.
    fn merge(&mut self, other: Node) {
        self.end += other.end;
        for (word, child) in other.literals {
            if self.folded {
                self.param.get_or_insert_with(Default::default).merge(child);
            } else {
                self.literals.entry(word).or_default().merge(child);
            }
        }
        if let Some(p) = other.param {
            self.param.get_or_insert_with(Default::default).merge(*p);
        }
        self.folded |= other.folded;
        // A folded node keeps no word: pass 2 would not go down it.
        if self.literals.len() > MAX_LITERALS || self.folded && !self.literals.is_empty() {
            self.fold();
        }
    }

    /// Every word here becomes a parameter.
    fn fold(&mut self) {
        self.folded = true;
        let words = std::mem::take(&mut self.literals);
        let param = self.param.get_or_insert_with(Default::default);
        for (_, child) in words {
            param.merge(child);
        }
    }
}

/// The first pass: templates learned from the paths seen.
#[derive(Default)]
pub(crate) struct TemplateLearner {
    roots: BTreeMap<String, Node>,
    nodes: usize,
}

/// The path of a target without its query, split into segments (a
/// trailing slash dropped; the root is no segment).
pub(crate) fn segments(target: &str) -> Vec<&str> {
    let path = target.split(['?', '#']).next().unwrap_or("");
    let mut segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if segs.len() > MAX_DEPTH {
        // Keep the shape's first part; the tail counts as one segment.
        let last = segs[MAX_DEPTH - 1];
        let at = last.as_ptr() as usize - path.as_ptr() as usize;
        segs.truncate(MAX_DEPTH - 1);
        segs.push(path[at..].trim_end_matches('/'));
    }
    segs
}

/// Whether a segment is an identifier rather than a word of the site's
/// vocabulary.
pub(crate) fn looks_like_id(seg: &str) -> bool {
    let b = seg.as_bytes();
    let digits = b.iter().filter(|c| c.is_ascii_digit()).count();
    if digits == b.len() {
        return true;
    }
    let hex = b.iter().all(|c| c.is_ascii_hexdigit() || *c == b'-');
    let uuid_like = b.len() == 36 && hex && b.iter().filter(|c| **c == b'-').count() == 4;
    let long_hex = b.len() >= 8 && hex && digits > 0;
    let token = b.len() >= 12
        && digits > 0
        && b.iter().any(|c| c.is_ascii_alphabetic())
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_');
    // Percent-encoded or numeric-heavy words: `item-12345`, `2024-03-01`.
    let numeric = digits * 2 >= b.len() && b.len() >= 4;
    uuid_like || long_hex || token || numeric
}

impl TemplateLearner {
    pub(crate) fn add(&mut self, method: &str, target: &str) {
        let budget_left = self.nodes < MAX_NODES;
        if self.roots.len() >= MAX_METHODS && !self.roots.contains_key(method) {
            return;
        }
        let mut node = self.roots.entry(method.to_string()).or_default();
        let mut created = 0;
        for seg in segments(target) {
            let as_param = node.folded
                || looks_like_id(seg)
                || !budget_left && !node.literals.contains_key(seg);
            node = if as_param {
                if node.param.is_none() {
                    created += 1;
                }
                node.param.get_or_insert_with(Default::default)
            } else {
                if !node.literals.contains_key(seg) {
                    created += 1;
                }
                let fold = !node.literals.contains_key(seg) && node.literals.len() >= MAX_LITERALS;
                if fold {
                    node.fold();
                    node.param.get_or_insert_with(Default::default)
                } else {
                    node.literals.entry(seg.to_string()).or_default()
                }
            };
        }
        node.end += 1;
        self.nodes += created;
        if created > 0 && self.nodes.is_multiple_of(10_000) {
            // Folding merged subtrees: count again now and then.
            self.nodes = self.roots.values().map(Node::size).sum();
        }
    }

    /// Every template with its count, most frequent first.
    pub(crate) fn finish(mut self) -> Templates {
        let mut list = Vec::new();
        for (method, root) in &mut self.roots {
            walk(root, method, &mut Vec::new(), &mut list);
        }
        let mut order: Vec<usize> = (0..list.len()).collect();
        order.sort_by(|&a, &b| {
            let (a, b) = (&list[a], &list[b]);
            b.count
                .cmp(&a.count)
                .then_with(|| a.method.cmp(&b.method))
                .then_with(|| a.pattern().cmp(&b.pattern()))
        });
        // `rank[id]`: where the template of walk order `id` went.
        let mut rank = vec![0; list.len()];
        for (at, &id) in order.iter().enumerate() {
            rank[id] = at;
        }
        let mut slots: Vec<Option<Template>> = list.into_iter().map(Some).collect();
        let list = order
            .iter()
            .map(|&id| slots[id].take().expect("each template once"))
            .collect();
        Templates {
            roots: self.roots,
            list,
            rank,
        }
    }
}

fn walk(node: &mut Node, method: &str, path: &mut Vec<Option<String>>, out: &mut Vec<Template>) {
    if node.end > 0 {
        node.id = out.len();
        out.push(Template {
            method: method.to_string(),
            segments: path.clone(),
            count: node.end,
        });
    }
    let mut words: Vec<_> = node.literals.iter_mut().collect();
    words.sort_by(|a, b| a.0.cmp(b.0));
    for (word, child) in words {
        path.push(Some(word.clone()));
        walk(child, method, path, out);
        path.pop();
    }
    if let Some(p) = &mut node.param {
        path.push(None);
        walk(p, method, path, out);
        path.pop();
    }
}

/// A path template: literal segments and parameters (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template {
    pub method: String,
    pub segments: Vec<Option<String>>,
    pub count: u64,
}

impl Template {
    /// `/post/{}`.
    pub(crate) fn pattern(&self) -> String {
        if self.segments.is_empty() {
            return "/".into();
        }
        self.segments
            .iter()
            .map(|s| format!("/{}", s.as_deref().unwrap_or("{}")))
            .collect()
    }

    pub(crate) fn params(&self) -> usize {
        self.segments.iter().filter(|s| s.is_none()).count()
    }

    /// A request name: the literal words joined (`api_users` for
    /// `/api/users/{}`), `home` for `/`, `{}` alone as `item`.
    pub(crate) fn base_name(&self) -> String {
        let words: Vec<String> = self
            .segments
            .iter()
            .flatten()
            .map(|w| identifier(w))
            .filter(|w| !w.is_empty())
            .collect();
        let name = if words.is_empty() {
            if self.segments.is_empty() {
                "home".to_string()
            } else {
                "item".to_string()
            }
        } else {
            words.join("_")
        };
        safe_name(name)
    }
}

/// `word` as part of a name: ASCII letters and digits lowercased, the
/// rest `_`, trimmed of `_`.
pub(crate) fn identifier(word: &str) -> String {
    let w: String = word
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    w.trim_matches('_').to_string()
}

/// Names handed out once each: `base`, else `base_2`, `base_3`…, the
/// first not taken yet.
///
/// Each base remembers the suffix it got to: the names below it were
/// taken and stay taken, so trying them again would find the same. A
/// HAR of 100,000 entries (83,000 requests, 50,000 of them `api_products`,
/// and 50,000 variables) took 2·10⁹ tries to name when each search began
/// at `_2`; now it takes about two a name.
#[derive(Default)]
pub(crate) struct UniqueNames {
    taken: HashSet<String>,
    /// For a base found taken: the suffix to try next.
    next: HashMap<String, usize>,
    /// Names tried, for the tests that the work stays linear.
    #[cfg(test)]
    pub(crate) tries: u64,
}

impl UniqueNames {
    /// None handed out, `names` taken already.
    pub(crate) fn with_taken(names: impl IntoIterator<Item = String>) -> UniqueNames {
        UniqueNames {
            taken: names.into_iter().collect(),
            ..UniqueNames::default()
        }
    }

    /// `base` or the first `base_N` not taken, now taken.
    pub(crate) fn name(&mut self, base: String) -> String {
        #[cfg(test)]
        {
            self.tries += 1;
        }
        if self.taken.insert(base.clone()) {
            return base;
        }
        let n = self.next.entry(base.clone()).or_insert(2);
        loop {
            let name = format!("{base}_{n}");
            *n += 1;
            #[cfg(test)]
            {
                self.tries += 1;
            }
            if self.taken.insert(name.clone()) {
                return name;
            }
        }
    }
}

/// A name a scenario can use for a request, a data file or a variable:
/// starting with a letter, not a word YAML reads as something else, not a
/// name templates reserve (`${env.X}`, `${cookie.X}`).
pub(crate) fn safe_name(name: String) -> String {
    const RESERVED: [&str; 14] = [
        "env", "cookie", "random", "raw", "now_ms", "null", "true", "false", "yes", "no", "on",
        "off", "y", "n",
    ];
    if name.is_empty() {
        "item".into()
    } else if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        format!("p{name}")
    } else if RESERVED.contains(&name.as_str()) {
        format!("{name}_page")
    } else {
        name
    }
}

/// The learned templates, to classify requests with.
pub(crate) struct Templates {
    roots: BTreeMap<String, Node>,
    pub list: Vec<Template>,
    rank: Vec<usize>,
}

impl Templates {
    /// The index in `list` of the template `target` falls under, and the
    /// values of its parameters; `None` for a path the first pass did not
    /// see (a log that changed between the passes).
    pub(crate) fn classify(&self, method: &str, target: &str) -> Option<(usize, Vec<String>)> {
        let mut node = self.roots.get(method)?;
        let mut values = Vec::new();
        for seg in segments(target) {
            match node.literals.get(seg) {
                Some(child) if !node.folded => node = child,
                _ => {
                    node = node.param.as_deref()?;
                    values.push(seg.to_string());
                }
            }
        }
        if node.end == 0 {
            return None;
        }
        Some((self.rank[node.id], values))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_and_words() {
        for id in [
            "123",
            "0",
            "550e8400-e29b-41d4-a716-446655440000",
            "deadbeef01",
            "a1b2c3d4e5f6g7",
            "2024-03-01",
            "item-12345",
        ] {
            assert!(looks_like_id(id), "{id}");
        }
        for word in ["post", "api", "v2", "login", "products", "p1", "about-us"] {
            assert!(!looks_like_id(word), "{word}");
        }
    }

    #[test]
    fn ids_and_many_words_become_parameters() {
        let mut l = TemplateLearner::default();
        for i in 0..100 {
            l.add("GET", &format!("/post/{i}"));
            l.add(
                "GET",
                &format!(
                    "/user/name{}/profile",
                    char::from(b'a' + (i % 26) as u8).to_string() + &"x".repeat(i / 26)
                ),
            );
        }
        l.add("GET", "/");
        l.add("POST", "/post/7?draft=1");
        l.add("GET", "/about");
        let t = l.finish();
        let patterns: Vec<String> = t
            .list
            .iter()
            .map(|t| format!("{} {}", t.method, t.pattern()))
            .collect();
        assert_eq!(
            patterns,
            [
                "GET /post/{}",
                "GET /user/{}/profile",
                "GET /",
                "GET /about",
                "POST /post/{}"
            ]
        );
        assert_eq!(t.list[1].base_name(), "user_profile");
        assert_eq!(t.list[2].base_name(), "home");
        let (i, values) = t.classify("GET", "/user/somebody/profile?tab=2").unwrap();
        assert_eq!((i, values), (1, vec!["somebody".to_string()]));
        assert_eq!(
            t.classify("GET", "/post/99/").unwrap(),
            (0, vec!["99".to_string()])
        );
        assert_eq!(t.classify("GET", "/nowhere"), None);
        assert_eq!(t.classify("PUT", "/"), None);
    }

    #[test]
    fn every_template_classifies_back_to_itself_after_folds() {
        // Over 40 first-level words fold that level; one of them had
        // folded below already, and `/shop/cart` must still be found.
        let mut l = TemplateLearner::default();
        for i in 0..50 {
            l.add("GET", &format!("/blog/post-{}", "x".repeat(i + 1)));
        }
        l.add("GET", "/shop/cart");
        for i in 0..45 {
            l.add(
                "GET",
                &format!(
                    "/section{}/page",
                    char::from(b'a' + (i % 26) as u8).to_string() + &"q".repeat(i / 26)
                ),
            );
        }
        let t = l.finish();
        for (i, tpl) in t.list.iter().enumerate() {
            let path: String = tpl
                .segments
                .iter()
                .map(|s| format!("/{}", s.as_deref().unwrap_or("v1a2b3c4d5e6")))
                .collect();
            let path = if path.is_empty() {
                "/".to_string()
            } else {
                path
            };
            assert_eq!(
                t.classify(&tpl.method, &path).map(|c| c.0),
                Some(i),
                "{} {path}",
                tpl.pattern()
            );
        }
    }

    #[test]
    fn deep_paths_keep_their_tail_in_the_last_segment() {
        let deep: String = (0..20).map(|i| format!("/d{i}")).collect();
        let segs = segments(&deep);
        assert_eq!(segs.len(), MAX_DEPTH);
        assert_eq!(segs[MAX_DEPTH - 1], "d15/d16/d17/d18/d19");
    }

    #[test]
    fn unique_names_are_the_first_free_suffix_found_in_a_try_or_two() {
        let mut names = UniqueNames::with_taken(["other".to_string()]);
        let mut got: Vec<String> = ["other", "a", "a", "a_3", "a", "a_2", "a"]
            .iter()
            .map(|b| names.name(b.to_string()))
            .collect();
        // `a_3` was taken by its own name before `a` got there; `a_2` asked
        // for as a base is taken, so it has a suffix of its own.
        assert_eq!(got, ["other_2", "a", "a_2", "a_3", "a_4", "a_2_2", "a_5"]);
        // Asked 10,000 times, one base costs two tries a name, where
        // counting from `_2` each time made 50 million.
        let mut names = UniqueNames::default();
        got = (0..10_000).map(|_| names.name("x".into())).collect();
        assert_eq!(got[9_999], "x_10000");
        assert!(names.tries < 2 * 10_000, "{}", names.tries);
    }
}
