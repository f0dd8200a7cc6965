//! Where a scenario's outside inputs come from: the files it names (CSV
//! data, certificates, schemas, token files) and the environment variables
//! it reads. On the controller they come from this host; a worker on
//! another host has neither, so the controller *records* what decoding the
//! scenario read and ships it with the job, and the worker decodes the same
//! text while *replaying* exactly those inputs — the same scenario on every
//! host, whatever each host's disk and environment hold.
//!
//! The mode is per thread and lasts for one closure: decoding runs on the
//! calling thread and reads through `files::read_bounded` and `env`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The inputs one decoding read, as shipped with a worker's job.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Shipped {
    /// Each file by the path decoding resolved (relative paths resolve from
    /// the scenario's path on the controller, which the job carries too).
    #[serde(with = "files_as_base64")]
    pub files: BTreeMap<PathBuf, Vec<u8>>,
    /// Each variable read, `None` when it was unset (so a default applies
    /// on the worker as it did here).
    pub env: BTreeMap<String, Option<String>>,
}

impl std::fmt::Debug for Shipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names and sizes only: keys, certificates and passwords travel
        // here, and must not end up in a log.
        let files: Vec<String> = self
            .files
            .iter()
            .map(|(p, b)| format!("{} ({} bytes)", p.display(), b.len()))
            .collect();
        let env: Vec<&String> = self.env.keys().collect();
        f.debug_struct("Shipped")
            .field("files", &files)
            .field("env", &env)
            .finish()
    }
}

impl Shipped {}

enum Mode {
    Local,
    Recording(Shipped),
    Replaying(Shipped),
}

thread_local! {
    static MODE: RefCell<Mode> = const { RefCell::new(Mode::Local) };
}

/// Runs `f` (a decoding) and returns what it read from files and the
/// environment along with its result.
pub(crate) fn record<T>(f: impl FnOnce() -> T) -> (T, Shipped) {
    let before = MODE.with(|m| m.replace(Mode::Recording(Shipped::default())));
    let out = f();
    let after = MODE.with(|m| m.replace(before));
    match after {
        Mode::Recording(shipped) => (out, shipped),
        _ => (out, Shipped::default()),
    }
}

/// Runs `f` (a decoding) reading files and variables from `shipped` only.
pub(crate) fn replay<T>(shipped: Shipped, f: impl FnOnce() -> T) -> T {
    let before = MODE.with(|m| m.replace(Mode::Replaying(shipped)));
    let out = f();
    MODE.with(|m| m.replace(before));
    out
}

/// Whether this thread decodes the scenario for a worker (recording what
/// to ship, or decoding it there): inputs only the controller uses — the
/// agents' token — are left out, so no secret travels that need not.
pub(crate) fn for_worker() -> bool {
    MODE.with(|m| !matches!(&*m.borrow(), Mode::Local))
}

/// A file's bytes when replaying: `Some(Ok)` for a shipped file, `Some(Err)`
/// for one the controller did not ship; `None` when reading this host's.
pub(super) fn replayed_file(path: &Path, what: &str) -> Option<Result<Vec<u8>, String>> {
    MODE.with(|m| match &*m.borrow() {
        Mode::Replaying(shipped) => Some(shipped.files.get(path).cloned().ok_or_else(|| {
            format!(
                "{what} `{}` was not shipped with the job (the controller read no such file)",
                path.display()
            )
        })),
        _ => None,
    })
}

/// Notes a file decoding read from this host (when recording).
pub(super) fn note_file(path: &Path, bytes: &[u8]) {
    MODE.with(|m| {
        if let Mode::Recording(shipped) = &mut *m.borrow_mut() {
            shipped.files.insert(path.to_path_buf(), bytes.to_vec());
        }
    });
}

/// An environment variable, from the shipped ones when replaying; noted
/// when recording.
pub(super) fn env(name: &str) -> Option<String> {
    MODE.with(|m| match &mut *m.borrow_mut() {
        Mode::Replaying(shipped) => shipped.env.get(name).cloned().flatten(),
        Mode::Recording(shipped) => {
            let value = std::env::var(name).ok();
            shipped.env.insert(name.to_string(), value.clone());
            value
        }
        Mode::Local => std::env::var(name).ok(),
    })
}

/// Files travel as base64 text: JSON would spell each byte as a number.
mod files_as_base64 {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(crate) fn serialize<S: Serializer>(
        files: &BTreeMap<PathBuf, Vec<u8>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let encoded: BTreeMap<&PathBuf, String> = files
            .iter()
            .map(|(p, b)| (p, base64::engine::general_purpose::STANDARD.encode(b)))
            .collect();
        encoded.serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<PathBuf, Vec<u8>>, D::Error> {
        let encoded = BTreeMap::<PathBuf, String>::deserialize(d)?;
        encoded
            .into_iter()
            .map(|(p, text)| {
                base64::engine::general_purpose::STANDARD
                    .decode(text.as_bytes())
                    .map(|b| (p, b))
                    .map_err(serde::de::Error::custom)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_decoding_replays_on_a_host_without_the_files_or_variables() {
        let dir = std::env::temp_dir().join(format!("autoperf-sources-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("users.csv");
        std::fs::write(&csv, "name\nalice\nbob\n").unwrap();
        let path = dir.join("s.yaml");
        let text = "name: s\ntarget: {base_url: \"${env.AUTOPERF_SOURCES_TEST_URL:-http://127.0.0.1:9}\"}\ndata:\n  users: {csv: users.csv}\nrequests:\n  a: {path: \"/${users.name}\"}\nsession: {start: a, transitions: {a: {a: 0.5}}}\n";
        let (scenario, shipped) = record(|| crate::scenario::parse(text, &path));
        let scenario = scenario.unwrap();
        assert_eq!(shipped.files.len(), 1, "{shipped:?}");
        assert_eq!(shipped.files[&csv], b"name\nalice\nbob\n");
        assert_eq!(shipped.env["AUTOPERF_SOURCES_TEST_URL"], None);
        // The file is gone from this "host": replaying still decodes the
        // same scenario, and through JSON as the job carries it.
        std::fs::remove_dir_all(&dir).unwrap();
        let wire = serde_json::to_string(&shipped).unwrap();
        let back: Shipped = serde_json::from_str(&wire).unwrap();
        assert_eq!(back, shipped);
        let again = replay(back, || crate::scenario::parse(text, &path)).unwrap();
        assert_eq!(again.feeders[0].rows.len(), scenario.feeders[0].rows.len());
        assert_eq!(
            again.target.endpoint.to_string(),
            scenario.target.endpoint.to_string()
        );
        // Outside the closure, this host's files count again.
        let e = crate::scenario::parse(text, &path).unwrap_err();
        assert!(e.to_string().contains("users.csv"), "{e}");
    }

    #[test]
    fn the_agents_token_stays_on_the_controller() {
        let dir = std::env::temp_dir().join(format!("autoperf-sources-tok-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("agent.token"), "agent-token-0123456789abcdef\n").unwrap();
        let path = dir.join("s.yaml");
        let text = "name: s\ntarget: {base_url: \"http://127.0.0.1:9\"}\nrequests:\n  a: {path: /}\nsession: {start: a}\nservers:\n  - {tier: web, agent: http://127.0.0.1:9870, processes: [tb-web], token_file: agent.token}\n";
        let here = crate::scenario::parse(text, &path).unwrap();
        assert!(here.servers[0].token.is_some());
        let (shipping, shipped) = record(|| crate::scenario::parse(text, &path));
        assert!(shipping.is_ok());
        assert!(shipped.files.is_empty(), "{shipped:?}");
        let there = replay(shipped, || crate::scenario::parse(text, &path)).unwrap();
        assert_eq!(there.servers[0].token, None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_the_controller_did_not_ship_is_named() {
        let e = replay(Shipped::default(), || {
            super::super::files::read_bounded(Path::new("/nowhere/x.pem"), 100, "CA file")
        })
        .unwrap_err();
        assert!(
            e.contains("/nowhere/x.pem") && e.contains("not shipped"),
            "{e}"
        );
    }
}
