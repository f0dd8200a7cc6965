//! An access log into the makings of a scenario, in two streaming passes:
//! the first detects the format and learns the path templates, the second
//! classifies every request, groups requests into sessions, and counts
//! what the CBMG, the think time, the arrivals and the data files are
//! estimated from. Memory is bounded by the templates' cap, the sessions
//! open at one time and a fixed sample of values per class, never by the
//! log's length.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use regex::Regex;
use serde::Serialize;

use super::classes::{
    identifier, safe_name, segments, Template, TemplateLearner, Templates, UniqueNames,
};
use super::entry::LogEntry;
use super::fit::{fit, ThinkFit};
use super::logline::{detect, JsonFields, LogFormat};
use super::reader::{Line, LogReader};
use super::sessions::{client_key, SessionCounts, Sessionizer};
use super::ImportError;

/// How the log is read and what is kept.
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// `None`: detected from the first lines.
    pub format: Option<LogFormat>,
    pub json: JsonFields,
    /// A client silent this long starts a new session.
    pub session_timeout_s: f64,
    /// Classes with a smaller share of the requests fold into `other`.
    pub min_share: f64,
    /// Paths ending in these extensions are static assets, not requests
    /// a user makes (a browser fetches them with the page).
    pub static_extensions: Vec<String>,
    /// User agents of robots and monitors.
    pub bots: Option<Regex>,
    /// Paths left out, whatever they are.
    pub exclude: Option<Regex>,
    /// Rows of observed values kept per class for its data file.
    pub data_rows: usize,
}

pub const DEFAULT_STATIC: &str =
    "css,js,mjs,map,png,jpg,jpeg,gif,webp,avif,svg,ico,bmp,woff,woff2,ttf,otf,eot,mp4,webm,mp3,wav";
pub const DEFAULT_BOTS: &str = r"(?i)bot\b|crawler|spider|slurp|bingpreview|facebookexternalhit|pingdom|uptimerobot|statuscake|monitoring|headlesschrome|lighthouse";

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            format: None,
            json: JsonFields::default(),
            session_timeout_s: 1800.0,
            min_share: 0.005,
            static_extensions: DEFAULT_STATIC.split(',').map(str::to_string).collect(),
            bots: Some(Regex::new(DEFAULT_BOTS).expect("a valid regex")),
            exclude: None,
            data_rows: 1000,
        }
    }
}

/// Told how far each pass is.
pub trait Progress {
    /// `pass` 1 or 2; `done` and `total` in bytes of the file.
    fn update(&mut self, pass: u8, done: u64, total: u64, lines: u64);
}

impl Progress for () {
    fn update(&mut self, _: u8, _: u64, _: u64, _: u64) {}
}

/// A request class of the imported scenario.
#[derive(Debug, Clone, Serialize)]
pub struct Class {
    pub name: String,
    pub method: String,
    /// `/post/{}`, or `(rare)` for an `other` class.
    pub pattern: String,
    /// The template's segments: words, and `None` for parameters.
    #[serde(skip)]
    pub segments: Vec<Option<String>>,
    pub requests: u64,
    pub share: f64,
    /// The data file's columns: `id`, `id2`… for the path's parameters,
    /// `query` when some requests had one; `target` alone for `other`.
    pub columns: Vec<String>,
    #[serde(skip)]
    pub rows: Vec<Vec<String>>,
    /// For `other`: the templates folded into it.
    pub folded: Vec<String>,
    /// Status codes seen, and how often.
    pub statuses: BTreeMap<u16, u64>,
}

impl Class {
    pub(crate) fn has_data(&self) -> bool {
        !self.columns.is_empty()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Malformed {
    pub line: u64,
    pub text: String,
    pub reason: String,
}

/// What the import found.
pub struct LogImport {
    pub format: String,
    pub gzip: bool,
    pub lines: u64,
    pub blank: u64,
    pub malformed: u64,
    pub malformed_examples: Vec<Malformed>,
    pub static_skipped: u64,
    pub bots_skipped: u64,
    pub excluded: u64,
    /// Requests of a method past the templates' cap, or of a path the
    /// first pass did not see (a file that changed between the passes).
    pub unclassified: u64,
    pub requests: u64,
    pub classes: Vec<Class>,
    pub counts: SessionCounts,
    pub think: Option<ThinkFit>,
    pub first_time: f64,
    pub last_time: f64,
    pub peak_open_sessions: usize,
}

const EXAMPLES: usize = 5;

enum Verdict {
    Use(LogEntry),
    Static,
    Bot,
    Excluded,
}

struct Filter<'a> {
    format: LogFormat,
    options: &'a LogOptions,
}

impl Filter<'_> {
    fn judge(&self, line: &str) -> Result<Verdict, String> {
        let e = self.format.parse(line)?;
        let last = segments(&e.target).last().copied().unwrap_or("");
        let ext = last.rsplit_once('.').map(|(_, x)| x.to_ascii_lowercase());
        if let Some(ext) = ext {
            if self.options.static_extensions.contains(&ext) {
                return Ok(Verdict::Static);
            }
        }
        if self
            .options
            .bots
            .as_ref()
            .is_some_and(|b| b.is_match(&e.agent))
        {
            return Ok(Verdict::Bot);
        }
        let path = e.target.split('?').next().unwrap_or("");
        if self
            .options
            .exclude
            .as_ref()
            .is_some_and(|x| x.is_match(path))
        {
            return Ok(Verdict::Excluded);
        }
        Ok(Verdict::Use(e))
    }
}

/// Where the log comes from: a file (read twice, never held), or bytes.
pub enum LogInput<'a> {
    File(&'a Path),
    Bytes(std::sync::Arc<[u8]>),
}

impl LogInput<'_> {
    fn path(&self) -> &Path {
        match self {
            LogInput::File(p) => p,
            LogInput::Bytes(_) => Path::new("(memory)"),
        }
    }
}

pub fn import_log(
    input: &LogInput,
    options: &LogOptions,
    progress: &mut dyn Progress,
) -> Result<LogImport, ImportError> {
    let path = input.path();
    let open = || {
        match input {
            LogInput::File(p) => LogReader::open(p),
            LogInput::Bytes(b) => LogReader::from_bytes(b.clone()),
        }
        .map_err(|source| ImportError::Read {
            path: path.to_path_buf(),
            source,
        })
    };
    let read_err = |source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    };

    // The format: given, or what most of the first lines parse as.
    let format = match &options.format {
        Some(f) => f.clone(),
        None => {
            let mut r = open()?;
            let mut sample = Vec::new();
            while sample.len() < 200 {
                match r.next_line().map_err(read_err)? {
                    Line::Text(t) if !t.trim().is_empty() => sample.push(t),
                    Line::Text(_) | Line::TooLong => {}
                    Line::End => break,
                }
            }
            detect(&sample, &options.json).map_err(|reason| ImportError::Format {
                path: path.to_path_buf(),
                reason,
            })?
        }
    };
    let filter = Filter {
        format: format.clone(),
        options,
    };

    // Pass 1: templates.
    let mut learner = TemplateLearner::default();
    let mut r = open()?;
    let mut lines = 0u64;
    loop {
        let line = match r.next_line().map_err(read_err)? {
            Line::End => break,
            Line::TooLong => continue,
            Line::Text(t) => t,
        };
        lines += 1;
        if lines.is_multiple_of(65_536) {
            progress.update(
                1,
                r.read.load(std::sync::atomic::Ordering::Relaxed),
                r.size,
                lines,
            );
        }
        if let Ok(Verdict::Use(e)) = filter.judge(&line) {
            learner.add(&e.method, &e.target);
        }
    }
    progress.update(1, r.size, r.size, lines);
    let templates = learner.finish();
    let total: u64 = templates.list.iter().map(|t| t.count).sum();
    if total == 0 {
        return Err(ImportError::Empty {
            path: path.to_path_buf(),
        });
    }
    let (mut classes, class_of) = name_classes(&templates, total, options.min_share);

    // Pass 2: sessions, counts, values.
    let mut sessions = Sessionizer::new(classes.len(), options.session_timeout_s);
    let mut samplers: Vec<Reservoir> = classes
        .iter()
        .map(|_| Reservoir::new(options.data_rows))
        .collect();
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    let mut out = LogImport {
        format: format.name().to_string(),
        gzip: false,
        lines: 0,
        blank: 0,
        malformed: 0,
        malformed_examples: Vec::new(),
        static_skipped: 0,
        bots_skipped: 0,
        excluded: 0,
        unclassified: 0,
        requests: 0,
        classes: Vec::new(),
        counts: Sessionizer::new(0, 1.0).finish(),
        think: None,
        first_time: f64::INFINITY,
        last_time: f64::NEG_INFINITY,
        peak_open_sessions: 0,
    };
    let mut r = open()?;
    out.gzip = r.gzip;
    loop {
        let line = match r.next_line().map_err(read_err)? {
            Line::End => break,
            Line::TooLong => {
                out.lines += 1;
                out.malformed += 1;
                if out.malformed_examples.len() < EXAMPLES {
                    out.malformed_examples.push(Malformed {
                        line: r.line_no,
                        text: String::new(),
                        reason: format!("longer than {} KiB", super::reader::MAX_LINE / 1024),
                    });
                }
                continue;
            }
            Line::Text(t) => t,
        };
        out.lines += 1;
        if out.lines.is_multiple_of(65_536) {
            progress.update(
                2,
                r.read.load(std::sync::atomic::Ordering::Relaxed),
                r.size,
                out.lines,
            );
            out.peak_open_sessions = out.peak_open_sessions.max(sessions.open_sessions());
        }
        if line.trim().is_empty() {
            out.blank += 1;
            continue;
        }
        let e = match filter.judge(&line) {
            Ok(Verdict::Use(e)) => e,
            Ok(Verdict::Static) => {
                out.static_skipped += 1;
                continue;
            }
            Ok(Verdict::Bot) => {
                out.bots_skipped += 1;
                continue;
            }
            Ok(Verdict::Excluded) => {
                out.excluded += 1;
                continue;
            }
            Err(reason) => {
                out.malformed += 1;
                if out.malformed_examples.len() < EXAMPLES {
                    out.malformed_examples.push(Malformed {
                        line: r.line_no,
                        text: line.chars().take(200).collect(),
                        reason,
                    });
                }
                continue;
            }
        };
        // A path the first pass did not see (the file grew): `other`.
        let (class, values) = match templates.classify(&e.method, &e.target) {
            Some((t, values)) => (class_of[t], values),
            None => match classes
                .iter()
                .position(|c| c.pattern == RARE && c.method == e.method)
            {
                Some(c) => (c, Vec::new()),
                None => {
                    out.unclassified += 1;
                    continue;
                }
            },
        };
        out.requests += 1;
        out.first_time = out.first_time.min(e.time);
        out.last_time = out.last_time.max(e.time);
        let c = &mut classes[class];
        c.requests += 1;
        *c.statuses.entry(e.status).or_default() += 1;
        if c.has_data() {
            let row = row_of(c, &values, &e.target);
            samplers[class].offer(row, &mut rng);
        }
        let client = client_key(&[&e.client, &e.agent]);
        let key = match &e.session {
            Some(s) => {
                let key = client_key(&["session", s]);
                // The visit's first request came before its cookie: the
                // session it opened under the client goes on under the cookie.
                if !sessions.is_open(key) {
                    sessions.rekey(client, key);
                }
                key
            }
            None => client,
        };
        sessions.add(key, e.time, class);
    }
    progress.update(2, r.size, r.size, out.lines);
    for (c, s) in classes.iter_mut().zip(samplers) {
        c.rows = s.rows;
        c.share = c.requests as f64 / out.requests.max(1) as f64;
    }
    out.counts = sessions.finish();
    out.think = fit(&out.counts.gaps);
    out.classes = classes;
    drop_empty(&mut out);
    tidy(&mut out);
    Ok(out)
}

/// The pattern of `other` classes.
pub(crate) const RARE: &str = "(rare)";

/// The scenario's classes from the templates: frequent ones by name, the
/// rare ones of each method folded into `other` (GET) or `other_post`…;
/// and for each template, the class it went to.
fn name_classes(templates: &Templates, total: u64, min_share: f64) -> (Vec<Class>, Vec<usize>) {
    let rare = |t: &Template| (t.count as f64) < min_share * total as f64;
    let other_name = |method: &str| {
        if method == "GET" {
            "other".to_string()
        } else {
            format!("other_{}", identifier(method))
        }
    };
    // `other` names are taken first, so a frequent `/other` cannot become
    // the class rare templates fold into.
    let mut used = UniqueNames::with_taken(
        templates
            .list
            .iter()
            .filter(|t| rare(t))
            .map(|t| other_name(&t.method)),
    );
    // Methods other than GET get their method in the name when another
    // method has the same words (`login` and `post_login`).
    let mut methods_of: HashMap<String, Vec<&str>> = HashMap::new();
    for t in templates.list.iter().filter(|t| !rare(t)) {
        methods_of.entry(t.base_name()).or_default().push(&t.method);
    }
    let mut classes: Vec<Class> = Vec::new();
    let mut class_of = Vec::with_capacity(templates.list.len());
    let mut others: HashMap<String, usize> = HashMap::new();
    for t in &templates.list {
        if rare(t) {
            let at = *others.entry(t.method.clone()).or_insert_with(|| {
                classes.push(Class {
                    name: other_name(&t.method),
                    method: t.method.clone(),
                    pattern: RARE.into(),
                    segments: Vec::new(),
                    requests: 0,
                    share: 0.0,
                    columns: vec!["target".into()],
                    rows: Vec::new(),
                    folded: Vec::new(),
                    statuses: BTreeMap::new(),
                });
                classes.len() - 1
            });
            // The page lists a few; thousands would only fill it.
            if classes[at].folded.len() < 100 {
                classes[at].folded.push(t.pattern());
            }
            class_of.push(at);
            continue;
        }
        let base = t.base_name();
        let clash = methods_of[&base].iter().any(|m| *m != t.method);
        let base = if t.method != "GET" && clash {
            // A method may hold `-` (a token): the name takes its letters.
            safe_name(format!("{}_{base}", identifier(&t.method)))
        } else {
            base
        };
        let name = used.name(base);
        let mut columns: Vec<String> = (0..t.params())
            .map(|i| {
                if i == 0 {
                    "id".to_string()
                } else {
                    format!("id{}", i + 1)
                }
            })
            .collect();
        // Whether some request had a query is known only in pass 2; the
        // column is kept and dropped afterwards if always empty.
        columns.push("query".into());
        classes.push(Class {
            name,
            method: t.method.clone(),
            pattern: t.pattern(),
            segments: t.segments.clone(),
            requests: 0,
            share: 0.0,
            columns,
            rows: Vec::new(),
            folded: Vec::new(),
            statuses: BTreeMap::new(),
        });
        class_of.push(classes.len() - 1);
    }
    (classes, class_of)
}

/// Classes no request of the second pass went to (the file changed
/// between the passes) go, the counts renumbered: a class without visits
/// would be a request no session reaches.
fn drop_empty(im: &mut LogImport) {
    if im.classes.iter().all(|c| c.requests > 0) {
        return;
    }
    let mut new_index = Vec::with_capacity(im.classes.len());
    let mut next = 0;
    for c in &im.classes {
        new_index.push((c.requests > 0).then(|| {
            next += 1;
            next - 1
        }));
    }
    let c = &mut im.counts;
    let keep = |v: &mut Vec<u64>| {
        let old = std::mem::take(v);
        *v = old
            .into_iter()
            .enumerate()
            .filter(|(i, _)| new_index[*i].is_some())
            .map(|(_, x)| x)
            .collect();
    };
    keep(&mut c.starts);
    keep(&mut c.exits);
    c.steps = std::mem::take(&mut c.steps)
        .into_iter()
        .filter_map(|((a, b), n)| Some(((new_index[a]?, new_index[b]?), n)))
        .collect();
    c.classes = next;
    im.classes.retain(|c| c.requests > 0);
}

/// One data row: the parameters' values and the query (with its `?`), or
/// the whole target for `other`.
fn row_of(c: &Class, values: &[String], target: &str) -> Vec<String> {
    if c.pattern == RARE {
        // The scenario's path writes the leading `/` itself.
        return vec![target.strip_prefix('/').unwrap_or(target).to_string()];
    }
    let query = target
        .find('?')
        .map(|i| target[i..].to_string())
        .unwrap_or_default();
    let mut row: Vec<String> = values.to_vec();
    row.resize(c.columns.len() - 1, String::new());
    row.push(query);
    row
}

/// A uniform sample of a class's requests (Vitter's algorithm R), so the
/// data file holds values as often as the log had them.
struct Reservoir {
    cap: usize,
    seen: u64,
    rows: Vec<Vec<String>>,
}

impl Reservoir {
    fn new(cap: usize) -> Reservoir {
        Reservoir {
            cap,
            seen: 0,
            rows: Vec::new(),
        }
    }

    fn offer(&mut self, row: Vec<String>, rng: &mut fastrand::Rng) {
        self.seen += 1;
        if self.rows.len() < self.cap {
            self.rows.push(row);
        } else {
            let j = rng.u64(0..self.seen);
            if (j as usize) < self.cap {
                self.rows[j as usize] = row;
            }
        }
    }
}

/// Drops the `query` column of classes that never had one.
fn tidy(import: &mut LogImport) {
    for c in &mut import.classes {
        if c.pattern == RARE {
            continue;
        }
        let q = c.columns.len() - 1;
        if c.rows.iter().all(|r| r[q].is_empty()) {
            c.columns.pop();
            for r in &mut c.rows {
                r.pop();
            }
        }
        if c.columns.is_empty() {
            c.rows.clear();
        }
    }
}
