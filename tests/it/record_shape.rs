//! The run record is a contract (docs/design.md 4.8: "add, don't rename"): the keys
//! of `run.json` for a capacity analysis, a profile and a closed and an open
//! run of the bundled demo scenario are compared with golden key lists
//! (`tests/golden/*.keys`, one JSON path a line, arrays as `[]`), taken from
//! records written before the record's shapes were typed. A key that
//! disappears fails; a new key fails too until it is added to the golden
//! list on purpose — `AUTOPERF_UPDATE_GOLDEN=1` adds new keys, never
//! removes one.

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;

/// Every path of `v` below `prefix`. `errors_by_kind` holds the kinds that
/// happened, which differ from run to run.
fn paths(v: &serde_json::Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, x) in map {
                if k == "errors_by_kind" {
                    continue;
                }
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(p.clone());
                paths(x, &p, out);
            }
        }
        serde_json::Value::Array(items) => {
            for x in items {
                paths(x, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

/// Compares the keys of `out`'s run.json with the golden list; `names`
/// maps this testbed's tagged process names (which are keys too) to the
/// plain ones the list holds.
fn assert_shape(out: &Path, golden: &str, names: &[(&str, &str)]) {
    let mut found = BTreeSet::new();
    paths(&support::run_json(out), "", &mut found);
    // `superseded` holds levels run again (a generator bottleneck, a lost
    // worker, servers short of CPU on a busy machine): there or not as the
    // machine was, and level objects whose keys `levels[]` holds.
    // `client.cpu_quota` is there when the tests run under a cgroup CPU
    // quota (a container's limit), as the machine is.
    let keys: BTreeSet<String> = found
        .into_iter()
        .filter(|k| !k.starts_with("superseded"))
        .filter(|k| !k.contains("client.cpu_quota"))
        .map(|k| {
            names
                .iter()
                .fold(k, |k, (tagged, plain)| k.replace(tagged, plain))
        })
        .collect();
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{golden}.keys"));
    let text = std::fs::read_to_string(&file).unwrap();
    let expected: BTreeSet<String> = text.lines().map(str::to_string).collect();
    let missing: Vec<&String> = expected.difference(&keys).collect();
    let added: Vec<&String> = keys.difference(&expected).collect();
    assert!(
        missing.is_empty(),
        "{golden}: run.json lost keys users and tests rely on: {missing:?}"
    );
    if !added.is_empty() && std::env::var_os("AUTOPERF_UPDATE_GOLDEN").is_some() {
        let all: Vec<&String> = expected.union(&keys).collect();
        let text: String = all.iter().map(|k| format!("{k}\n")).collect();
        std::fs::write(&file, text).unwrap();
        return;
    }
    assert!(
        added.is_empty(),
        "{golden}: run.json has keys the golden list does not: {added:?} (if intended, run with AUTOPERF_UPDATE_GOLDEN=1)"
    );
}

#[test]
fn run_json_keeps_its_keys_in_every_mode() {
    let tb = support::testbed(1);
    let agent = support::agent();
    let dir = support::scratch_dir("record-shape");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("examples/testbed.yaml"))
        .unwrap()
        .replace("http://127.0.0.1:8080", &tb.web_url)
        .replace("http://127.0.0.1:9870", &agent.url())
        .replace("[tb-web]", &format!("[{}]", tb.web_process))
        .replace("[tb-db]", &format!("[{}]", tb.db_process));
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::copy(
        root.join("examples/data/actors.csv"),
        dir.join("data/actors.csv"),
    )
    .unwrap();
    let scenario = dir.join("shop.yaml");
    std::fs::write(&scenario, text).unwrap();
    let s = scenario.to_str().unwrap();
    let runs: [(&str, &[&str]); 4] = [
        (
            "capacity",
            &["capacity", s, "--levels", "2,4", "--duration", "3s"],
        ),
        (
            "profile",
            &["profile", s, "--requests", "browse", "--users", "2"],
        ),
        (
            "run-closed",
            &["run", s, "--users", "2", "--duration", "3s"],
        ),
        (
            "run-open",
            &["run", s, "--rate", "50/s", "--duration", "3s"],
        ),
    ];
    for (golden, args) in runs {
        let out = dir.join(golden);
        let mut args = args.to_vec();
        args.extend(["--quiet", "--out", out.to_str().unwrap()]);
        let (code, stdout, stderr) = support::autoperf(&args);
        assert!(
            matches!(code, Some(0) | Some(1)),
            "{golden}: exit {code:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        assert_shape(
            &out,
            golden,
            &[(&tb.web_process, "tb-web"), (&tb.db_process, "tb-db")],
        );
    }
}
