//! Whole-file tests: the example of docs/design.md, the shipped examples, every error
//! `autoperf check` must report (with its line and column), and the schema
//! kept in step with the decoder.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::model::OnMissing;
use super::template::Bindings;
use super::*;

/// A fresh directory under the system's temp dir for one test.
fn temp_dir() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "autoperf-scenario-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const DESIGN_EXAMPLE: &str = r#"name: shop-browse
target:
  base_url: http://127.0.0.1:8080
  timeout: 10s
think_time: {exponential: 1s}        # or: 1s | {uniform: [500ms, 1500ms]}
data:
  actors: {csv: actors.csv}          # name-value pairs read from a file, one row per use
requests:
  login:
    method: POST
    path: /login
    form: {user: "user${random(1,5000)}", password: secret}
    extract: {token: {regex: 'token=(\w+)'}}
  search_actor:
    path: /browse?actor=${actors.name}
    headers: {Authorization: "Bearer ${token}"}
  purchase:
    method: POST
    path: /purchase
    json: {item: "${random(1,10000)}", qty: 1}
session:                              # a CBMG: probabilistic navigation graph
  start: login
  transitions:
    login: {search_actor: 0.7, purchase: 0.2}        # the rest (0.1) ends the session
    search_actor: {search_actor: 0.3, purchase: 0.3}
    purchase: {}
servers:                              # processes that may be the bottleneck
  - {tier: web, agent: http://127.0.0.1:9870, processes: [tb-web], cores: 1}
  - {tier: db,  agent: http://127.0.0.1:9870, processes: [tb-db]}
prerequisites: [login]               # run before profiling any other request
thresholds:                          # optional SLOs, checked at the end of `run`
  - "p99 < 250ms"
  - "error_rate < 1%"
"#;

/// Parses `text` as `dir/scenario.yaml`, with an `actors.csv` beside it.
fn parse_in_dir(text: &str) -> (PathBuf, Result<Scenario, Diagnostics>) {
    let dir = temp_dir();
    std::fs::write(
        dir.join("actors.csv"),
        "name,id\nKevin Bacon,1\nMeryl \"S\",2\n",
    )
    .unwrap();
    let path = dir.join("scenario.yaml");
    let result = parse(text, &path);
    (dir, result)
}

pub(super) fn ok(text: &str) -> Scenario {
    match parse_in_dir(text).1 {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

pub(super) fn errors(text: &str) -> Vec<Diagnostic> {
    match parse_in_dir(text).1 {
        Ok(_) => panic!("expected errors"),
        Err(Diagnostics(d)) => d,
    }
}

/// The one error whose message contains `needle`, at `line`:`column`.
#[track_caller]
pub(super) fn expect(text: &str, needle: &str, line: usize, column: usize) -> Diagnostic {
    let all = errors(text);
    let found: Vec<&Diagnostic> = all.iter().filter(|d| d.message.contains(needle)).collect();
    assert_eq!(found.len(), 1, "`{needle}` in {all:#?}");
    assert_eq!(
        (found[0].line, found[0].column),
        (line, column),
        "{:#?}",
        found[0]
    );
    found[0].clone()
}

pub(super) struct Fixed;

impl Bindings for Fixed {
    fn random(&mut self, lo: i64, _hi: i64) -> i64 {
        lo
    }
    fn unit(&mut self) -> f64 {
        0.25
    }
    fn now_ms(&mut self) -> i64 {
        1_700_000_000_000
    }
    fn column(&mut self, _feeder: FeederId, column: usize) -> &[u8] {
        [&b"Kevin Bacon"[..], b"1"][column]
    }
    fn var(&self, _var: VarId) -> &[u8] {
        b"abc"
    }
}

pub(super) fn http(r: &Request) -> &HttpRequest {
    match &r.action {
        Action::Http(h) => h,
        Action::Produce(_) => panic!("an HTTP request"),
    }
}

pub(super) fn render(t: &Template) -> String {
    let mut out = Vec::new();
    t.render(&mut Fixed, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn design_example_parses() {
    let s = ok(DESIGN_EXAMPLE);
    assert_eq!(s.name, "shop-browse");
    assert_eq!(s.target.endpoint.to_string(), "http://127.0.0.1:8080");
    assert_eq!(s.target.timeout, Duration::from_secs(10));
    assert_eq!(
        s.think_time,
        ThinkTime::Exponential {
            mean: Duration::from_secs(1)
        }
    );
    assert_eq!(s.feeders.len(), 1);
    assert_eq!(s.feeders[0].columns, ["name", "id"]);
    assert_eq!(s.feeders[0].rows[1], ["Meryl \"S\"", "2"]);
    let names: Vec<&str> = s.requests.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["login", "search_actor", "purchase"]);
    assert_eq!(s.variables, ["token"]);

    let login = http(&s.requests[0]);
    assert_eq!(login.method, "POST");
    let Some(Body::Form(form)) = &login.body else {
        panic!("form body")
    };
    let form: Vec<(String, String)> = form.iter().map(|(k, v)| (k.clone(), render(v))).collect();
    assert_eq!(
        form,
        [
            ("user".into(), "user1".into()),
            ("password".into(), "secret".into())
        ]
    );
    assert!(matches!(
        &s.requests[0].extracts[..],
        [Extract {
            var: VarId(0),
            from: ExtractFrom::Regex(_),
            on_missing: OnMissing::Keep,
        }]
    ));

    let search = http(&s.requests[1]);
    assert_eq!(search.method, "GET");
    assert_eq!(render(&search.path), "/browse?actor=Kevin%20Bacon");
    assert_eq!(search.path.feeders().collect::<Vec<_>>(), [FeederId(0)]);
    assert_eq!(render(&search.headers[0].1), "Bearer abc");

    let Some(Body::Json(json)) = &http(&s.requests[2]).body else {
        panic!("json body")
    };
    assert_eq!(render(json), r#"{"item":"1","qty":1}"#);
    assert_eq!(
        http(&s.requests[2]).path.static_bytes(),
        Some(&b"/purchase"[..])
    );

    assert_eq!(s.session.only_start(), Some(RequestId(0)));
    let visits = s.session.expected_visits();
    assert!((visits[1] - 1.0).abs() < 1e-9 && (visits[2] - 0.5).abs() < 1e-9);
    assert_eq!(s.servers.len(), 2);
    assert_eq!(s.servers[0].cores, Some(1));
    assert_eq!(s.servers[1].processes, ["tb-db"]);
    assert_eq!(s.prerequisites, [RequestId(0)]);
    assert_eq!(s.thresholds.len(), 2);
    assert_eq!(s.thresholds[1].bound, 0.01);
    assert_eq!(s.capacity, CapacitySettings::default());
}

#[test]
fn shipped_example_loads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/testbed.yaml");
    let s = load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(s.requests.len() >= 5);
    let visits = s.session.expected_visits();
    assert!(
        visits.iter().all(|v| v.is_finite() && *v > 0.0),
        "{visits:?}"
    );
    assert_eq!(s.servers.len(), 2);
}

#[test]
fn set_computes_variables_and_check_places_its_errors() {
    let head = "target: {base_url: 'http://127.0.0.1:1'}\nrequests:\n  a:\n    path: /\n";
    let s = ok(&format!(
        "{head}    method: POST\n    set: {{n: '${{n + 1}}', sig: '${{hmac_sha256(\"k\", concat(n, \"x\"))}}'}}\n    body: '${{sig}}'\n"
    ));
    let a = &s.requests[0];
    assert_eq!(a.sets.len(), 2);
    // A cookie named inside an expression is the user's cookie variable.
    let s = ok(&format!(
        "{head}    headers: {{X: '${{upper(cookie.sid)}}'}}\n"
    ));
    assert_eq!(s.variables, ["cookie.sid"]);
    assert_eq!(
        a.templates().len(),
        4,
        "the sets' templates are the request's too"
    );
    let e = expect(
        &format!("{head}    set:\n      n: '${{uuidd()}}'\n"),
        "unknown function `uuidd`",
        6,
        11,
    );
    assert_eq!(e.hint.as_deref(), Some("did you mean `uuid`?"));
    expect(
        &format!("{head}    set: {{n: '${{now(\"fortnight\")}}'}}\n"),
        "unknown time format `fortnight`",
        5,
        15,
    );
    expect(
        &format!("{head}    set: {{'bad name': x}}\n"),
        "expected a variable name",
        5,
        11,
    );
}

#[test]
fn a_path_may_begin_with_a_column_whose_every_value_is_a_path() {
    let dir = temp_dir();
    let path = dir.join("s.yaml");
    let scenario = |csv: &str, path_template: &str| {
        std::fs::write(dir.join("pages.csv"), csv).unwrap();
        let text = format!(
            "target: {{base_url: 'http://127.0.0.1:1'}}\ndata: {{pages: {{csv: pages.csv}}, n: {{range: [1, 3]}}}}\nrequests:\n  page: {{path: '{path_template}'}}\n"
        );
        parse(&text, &path)
    };
    let s = scenario("path\n/2023/05/a-post/\n/about/\n", "${raw(pages.path)}").unwrap();
    let Action::Http(page) = &s.requests[0].action else {
        panic!()
    };
    assert_eq!(page.path.feeders().count(), 1);
    let message = |csv: &str, t: &str| scenario(csv, t).unwrap_err().0.remove(0).message;
    assert!(
        message("path\n/a/\nabout/\n", "${raw(pages.path)}").contains("data row 2 of"),
        "the first row that is not a path is named"
    );
    assert!(message("path\n/a/\n", "${pages.path}").contains("encoded as `%2F`"));
    assert!(message("path\n/a/\n", "${n.n}").contains("a range feeds numbers"));
    // A value known at load time that is a path is one.
    assert!(scenario("path\n/a/\n", "${raw(env.AUTOPERF_UNSET_BASE:-/v1)}/users").is_ok());
    assert!(
        message("path\n/a/\n", "${env.AUTOPERF_UNSET_BASE:-/v1}/users")
            .contains("encoded as `%2F`")
    );
    assert!(message("path\n/a/\n", "${uuid()}").contains("expected a path starting with `/`"));
    assert!(
        message("path\n/a/\n", "p${raw(pages.path)}").contains("expected a path starting with `/`")
    );
}

#[test]
fn defaults_and_small_forms() {
    let s = ok("target: {base_url: 'http://example.com/api/'}\nrequests:\n  only: {path: /x, method: put, body: raw}\n");
    assert_eq!(s.name, "scenario");
    let Endpoint::Http(base) = &s.target.endpoint else {
        panic!("an HTTP target")
    };
    assert_eq!(base.port, 80);
    assert_eq!(base.path_prefix, "/api");
    assert_eq!(s.target.timeout, Duration::from_secs(10));
    assert_eq!(s.think_time, ThinkTime::Constant(Duration::ZERO));
    assert_eq!(http(&s.requests[0]).method, "PUT");
    assert_eq!(s.session.only_start(), Some(RequestId(0)));
    assert_eq!(s.session.exit_probability(RequestId(0)), 1.0);

    let s = ok("target: {base_url: 'http://h:1'}\nthink_time: {uniform: [500ms, 1.5s]}\nrequests: {a: {path: /}}\ncapacity: {epsilon: 10%, k_ovld: 4, min_duration: 5s, demand_epsilon: 3}\n");
    assert_eq!(
        s.think_time,
        ThinkTime::Uniform {
            min: Duration::from_millis(500),
            max: Duration::from_millis(1500)
        }
    );
    assert_eq!(s.capacity.epsilon, 0.1);
    assert_eq!(s.capacity.k_ovld, 4);
    assert_eq!(s.capacity.min_duration, Duration::from_secs(5));
    assert_eq!(s.capacity.demand_epsilon, 3.0);
    assert_eq!(s.capacity.precision, Some(0.03));
}

#[test]
fn a_levels_precision_is_a_fraction_or_off() {
    let with = |p: &str| {
        format!("target: {{base_url: 'http://h:1'}}\nrequests: {{a: {{path: /}}}}\ncapacity: {{precision: {p}}}\n")
    };
    assert_eq!(ok(&with("5%")).capacity.precision, Some(0.05));
    assert_eq!(ok(&with("off")).capacity.precision, None);
    expect(
        &with("0"),
        "expected a precision between 0 and 100% (like `3%`), or `off`, found `0`",
        3,
        23,
    );
    expect(
        &with("always"),
        "expected a precision (or `off`) between 0 and 1",
        3,
        23,
    );
}

#[test]
fn json_bodies_keep_types_and_escape() {
    let s = ok(
        "target: {base_url: 'http://h'}\ndata: {actors: {csv: actors.csv}}\nrequests:\n  a:\n    path: /\n    json: {s: 'x\"${actors.name}', n: 1.5, b: true, z: ~, l: [1, +2, '3'], k\"q: {}}\n",
    );
    let Some(Body::Json(t)) = &http(&s.requests[0]).body else {
        panic!()
    };
    assert_eq!(
        render(t),
        r#"{"s":"x\"Kevin Bacon","n":1.5,"b":true,"z":null,"l":[1,2,"3"],"k\"q":{}}"#
    );
    // `random(…)` alone is a number; a function whose name begins the same
    // way is text.
    let s = ok(
        "target: {base_url: 'http://h'}\nrequests:\n  a:\n    path: /\n    json:\n      r: ${random(7, 7)}\n      s: ${random_string(2)}\n",
    );
    let Some(Body::Json(t)) = &http(&s.requests[0]).body else {
        panic!()
    };
    let body = render(t);
    assert!(body.starts_with(r#"{"r":7,"s":""#), "{body}");
}

#[test]
fn yaml_syntax_error() {
    let d = expect(
        "target: {base_url: http://h\nrequests: {}\n",
        "invalid YAML",
        2,
        9,
    );
    assert!(d.source_line.is_some());
}

#[test]
fn duplicate_keys() {
    expect(
        "target: {base_url: 'http://h'}\nrequests:\n  a: {path: /}\n  a: {path: /b}\n",
        "duplicate key `a` (first defined at line 3)",
        4,
        3,
    );
}

#[test]
fn wrong_types_and_bad_durations() {
    let text = "target:\n  base_url: http://h\n  timeout: fast\nthink_time: [1s]\nrequests: {a: {path: /}}\ncapacity: {k_ovld: many, epsilon: 2}\n";
    expect(
        text,
        "expected a duration like `500ms`, `30s` or `2m`, found `fast`",
        3,
        12,
    );
    expect(text, "found a list", 4, 13);
    expect(
        text,
        "expected a positive whole number, found `many`",
        6,
        20,
    );
    expect(text, "expected a fraction between 0 and 1", 6, 35);
    let all = errors(text);
    assert_eq!(all.len(), 4, "{all:#?}");
}

#[test]
fn unknown_keys_suggest_close_names() {
    let text = "target:\n  base_url: http://h\n  timout: 5s\nrequests:\n  a: {path: /, methd: GET}\nbogus: 1\n";
    let d = expect(text, "unknown key `timout` in `target`", 3, 3);
    assert_eq!(d.hint.as_deref(), Some("did you mean `timeout`?"));
    let d = expect(text, "unknown key `methd` in request `a`", 5, 16);
    assert_eq!(d.hint.as_deref(), Some("did you mean `method`?"));
    let d = expect(text, "unknown key `bogus`", 6, 1);
    assert!(d.hint.unwrap().starts_with("expected one of: name, target"));
}

#[test]
fn missing_required_keys_point_at_the_parent() {
    expect(
        "target:\n  timeout: 1s\nrequests: {a: {path: /}}\n",
        "missing required key `base_url` (or `kafka`) in `target`",
        2,
        3,
    );
    expect(
        "name: x\ntarget: {base_url: 'http://h'}\n",
        "missing required key `requests`",
        1,
        1,
    );
    expect(
        "target: {base_url: 'http://h'}\nrequests:\n  a: {method: GET}\n",
        "missing required key `path` in request `a`",
        3,
        6,
    );
    expect(
        "target: {base_url: 'http://h'}\nrequests: {a: {path: /}, b: {path: /}}\n",
        "missing required key `session`",
        1,
        1,
    );
    expect("", "found an empty file", 1, 1);
}

#[test]
fn bad_base_urls_and_methods() {
    expect(
        "target: {base_url: 'ftp://h'}\nrequests: {a: {path: /}}\n",
        "expected a base URL like `http://127.0.0.1:8080`",
        1,
        20,
    );
    expect(
        "target: {base_url: 'http://h/a b'}\nrequests: {a: {path: /}}\n",
        "no spaces",
        1,
        20,
    );
    expect(
        "target: {base_url: 'http://h'}\nrequests: {a: {path: /, headers: {X-A: \"1\\r\\nHost: evil\"}}}\n",
        "holds a line break",
        2,
        40,
    );
    expect(
        "target: {base_url: 'http://h'}\nrequests: {a: {path: /, headers: {X-A: \"1\\0\"}}}\n",
        "control character",
        2,
        40,
    );
    expect(
        "target: {base_url: 'http://h'}\nrequests: {a: {path: \"/a\\tb\"}}\n",
        "without spaces or control characters",
        2,
        22,
    );
    expect(
        "target: {base_url: 'http://h:99999'}\nrequests: {a: {path: /}}\n",
        "port `99999`",
        1,
        20,
    );
    expect(
        "target: {base_url: 'http://h'}\nrequests: {a: {path: x, method: 'G T'}}\n",
        "starting with `/`, found `x`",
        2,
        22,
    );
    expect(
        "target: {base_url: 'http://h'}\nrequests: {a: {path: /, method: 'G T'}}\n",
        "HTTP method",
        2,
        33,
    );
}

const SESSION_HEAD: &str = "target: {base_url: 'http://h'}\nrequests:\n  login: {path: /l}\n  browse: {path: /b}\n  buy: {path: /p}\nsession:\n  start: login\n  transitions:\n";

#[test]
fn probabilities() {
    let text = format!("{SESSION_HEAD}    login: {{browse: 0.8, buy: 0.3}}\n    browse: {{buy: -0.1, login: 1.5}}\n");
    let d = expect(
        &text,
        "the transitions from `login` sum to 1.1, expected at most 1",
        9,
        12,
    );
    assert!(d.hint.is_some());
    expect(
        &text,
        "expected a probability between 0 and 1, found `-0.1`",
        10,
        19,
    );
    expect(
        &text,
        "expected a probability between 0 and 1, found `1.5`",
        10,
        32,
    );
}

#[test]
fn transitions_name_known_requests() {
    let text =
        format!("{SESSION_HEAD}    login: {{browse: 0.5, byu: 0.5}}\n    brwose: {{buy: 0.5}}\n");
    let d = expect(
        &text,
        "unknown request `byu` in the transitions from `login`",
        9,
        26,
    );
    assert_eq!(d.hint.as_deref(), Some("did you mean `buy`?"));
    let d = expect(
        &text,
        "unknown request `brwose` in `session.transitions`",
        10,
        5,
    );
    assert_eq!(d.hint.as_deref(), Some("did you mean `browse`?"));
    let d = expect(
        &format!("{SESSION_HEAD}    login: {{}}\n").replace("start: login", "start: logn"),
        "unknown request `logn`",
        7,
        10,
    );
    assert_eq!(d.hint.as_deref(), Some("did you mean `login`?"));
}

#[test]
fn unreachable_requests_and_endless_sessions() {
    let text = format!("{SESSION_HEAD}    login: {{browse: 0.5}}\n");
    let d = expect(
        &text,
        "request `buy` is never reached from `start` (login)",
        5,
        3,
    );
    assert!(d.hint.is_some());
    assert_eq!(errors(&text).len(), 1);

    let text =
        format!("{SESSION_HEAD}    login: {{browse: 0.5, buy: 0.5}}\n    browse: {{browse: 1}}\n");
    expect(
        &text,
        "the session can never end once it reaches `browse`",
        10,
        13,
    );
}

#[test]
fn csv_problems() {
    let (dir, result) = parse_in_dir(
        "target: {base_url: 'http://h'}\ndata:\n  gone: {csv: data/missing.csv}\n  actors: {csv: actors.csv}\nrequests:\n  a: {path: '/x?n=${actors.nmae}&g=${gone.x}'}\n",
    );
    let d = result.unwrap_err().0;
    assert_eq!(d.len(), 2, "{d:#?}");
    assert_eq!((d[0].line, d[0].column), (3, 15));
    let resolved = dir.join("data/missing.csv");
    assert!(
        d[0].message
            .contains(&format!("cannot read CSV file `{}`", resolved.display())),
        "{}",
        d[0].message
    );
    assert_eq!(d[1].message, "data feeder `actors` has no column `nmae`");
    assert_eq!((d[1].line, d[1].column), (6, 19));
    assert_eq!(d[1].hint.as_deref(), Some("did you mean `name`?"));

    let dir = temp_dir();
    std::fs::write(dir.join("empty.csv"), "name\n").unwrap();
    let err = parse(
        "target: {base_url: 'http://h'}\ndata: {e: {csv: empty.csv}}\nrequests: {a: {path: /}}\n",
        &dir.join("s.yaml"),
    )
    .unwrap_err();
    assert!(err.0[0].message.contains("at least one data row"), "{err}");
}

#[test]
fn template_names() {
    let text = "target: {base_url: 'http://h'}\nrequests:\n  a:\n    path: /a?t=${tokn}&r=${random(9,1)}\n    extract: {token: {json: /t}}\n  b:\n    path: /b\n    headers: {X: \"${actor.name}\"}\n    body: 'oops ${'\n";
    let d = expect(text, "unknown variable `tokn`", 4, 16);
    assert_eq!(d.hint.as_deref(), Some("did you mean `token`?"));
    expect(text, "lo <= hi", 4, 26);
    let d = expect(text, "unknown data feeder `actor`", 8, 19);
    assert_eq!(
        d.hint.as_deref(),
        Some("data feeders are declared under `data:`")
    );
    expect(text, "unclosed `${`", 9, 17);
}

#[test]
fn bad_regex_and_extract() {
    let text = "target: {base_url: 'http://h'}\nrequests:\n  a:\n    path: /\n    extract:\n      t: {regex: 'a(b'}\n      u: {json: 'no-slash'}\n";
    let d = expect(
        text,
        "expected a valid regular expression, found `a(b`",
        6,
        18,
    );
    assert!(d.message.ends_with(": unclosed group"), "{}", d.message);
    expect(
        text,
        "expected a JSON pointer like `/token`, found `no-slash`",
        7,
        17,
    );
}

#[test]
fn thresholds_and_prerequisites() {
    let text = "target: {base_url: 'http://h'}\nrequests: {login: {path: /}}\nprerequisites: [logn]\nthresholds:\n  - p99 < fast\n  - lgin.p99 < 1s\n  - p99 250ms\n";
    let d = expect(text, "unknown request `logn` in prerequisite", 3, 17);
    assert_eq!(d.hint.as_deref(), Some("did you mean `login`?"));
    expect(
        text,
        "expected a duration like `250ms` after `<`, found `fast`",
        5,
        5,
    );
    let d = expect(text, "unknown request `lgin`", 6, 5);
    assert_eq!(d.hint.as_deref(), Some("did you mean `login`?"));
    expect(text, "expected a comparison", 7, 5);
}

#[test]
fn all_errors_in_one_pass_in_file_order() {
    let text = "target:\n  base_url: ftp://h\n  timeout: soon\nthink_time: {poisson: 1s}\nrequests:\n  a: {path: /, methd: GET}\nthresholds: ['p42.42 < 1s']\nservers:\n  - {tier: web, processes: []}\n";
    let all = errors(text);
    let lines: Vec<usize> = all.iter().map(|d| d.line).collect();
    assert_eq!(lines, [2, 3, 4, 6, 7, 9, 9], "{all:#?}");
    let shown = Diagnostics(all).to_string();
    assert!(shown.contains("scenario.yaml:3:12: error: expected a duration like `500ms`, `30s` or `2m`, found `soon`\n  |\n3 |   timeout: soon\n  |            ^"), "{shown}");
    assert!(shown.ends_with("7 errors"));
}

#[test]
fn unreadable_file_is_one_positionless_diagnostic() {
    let path = temp_dir().join("nope.yaml");
    let err = load(&path).unwrap_err();
    assert_eq!(err.0.len(), 1);
    assert_eq!((err.0[0].line, err.0[0].column), (0, 0));
    assert!(err.to_string().starts_with(&format!(
        "{}: error: cannot read scenario file",
        path.display()
    )));
}

#[test]
fn load_resolves_csv_beside_the_file() {
    let dir = temp_dir();
    std::fs::write(dir.join("actors.csv"), "name\nA\n").unwrap();
    std::fs::write(
        dir.join("shop.yaml"),
        DESIGN_EXAMPLE.replace("name,id", "name"),
    )
    .unwrap();
    let s = load(&dir.join("shop.yaml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        s.feeders[0].source,
        FeederSource::Csv(dir.join("actors.csv"))
    );
}

/// The schema and the decoder must accept the same keys.
#[test]
fn schema_matches_decoder_keys() {
    let text = include_str!("../../../../schema/scenario.schema.json");
    let schema: serde_json::Value = serde_json::from_str(text).unwrap();
    let keys = |v: &serde_json::Value| -> Vec<String> {
        let mut k: Vec<String> = v["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        k.sort();
        k
    };
    let sorted = |k: &[&str]| -> Vec<String> {
        let mut k: Vec<String> = k.iter().map(|s| s.to_string()).collect();
        k.sort();
        k
    };
    assert_eq!(keys(&schema), sorted(decode::TOP_LEVEL_KEYS));
    assert_eq!(schema["additionalProperties"], false);
    let defs = &schema["$defs"];
    assert_eq!(keys(&defs["target"]), sorted(decode::TARGET_KEYS));
    assert_eq!(keys(&defs["kafka"]), sorted(decode::KAFKA_KEYS));
    assert_eq!(keys(&defs["tls"]), sorted(decode::TLS_KEYS));
    assert_eq!(keys(&defs["check"]), sorted(decode::requests::CHECK_KEYS));
    assert_eq!(keys(&defs["feeder"]), sorted(decode::DATA_KEYS));
    assert_eq!(
        keys(&defs["produce"]),
        sorted(decode::requests::PRODUCE_KEYS)
    );
    assert_eq!(keys(&defs["value"]), sorted(decode::requests::VALUE_KEYS));
    assert_eq!(keys(&defs["avro"]), sorted(decode::AVRO_KEYS));
    assert_eq!(keys(&defs["session"]), sorted(decode::SESSION_KEYS));
    assert_eq!(keys(&defs["server"]), sorted(decode::SERVER_KEYS));
    assert_eq!(keys(&defs["capacity"]), sorted(decode::CAPACITY_KEYS));
    assert_eq!(keys(&defs["workers"]), sorted(decode::WORKERS_KEYS));
    assert_eq!(keys(&defs["script"]), sorted(decode::SCRIPT_KEYS));
    assert_eq!(keys(&defs["class"]), sorted(decode::CLASS_KEYS));
    assert_eq!(
        keys(&defs["request"]),
        sorted(decode::requests::REQUEST_KEYS)
    );
}

/// Each broken fixture names, on its first line, the position and message
/// of the error it must produce (`# expect: LINE:COL: message`).
#[test]
fn broken_fixtures() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scenario");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let expect = text
            .lines()
            .next()
            .unwrap()
            .strip_prefix("# expect: ")
            .unwrap();
        let (position, message) = expect.split_once(": ").unwrap();
        let errors = load(&path).expect_err(&path.display().to_string());
        let shown = errors.to_string();
        assert!(
            shown.contains(&format!(":{position}: error: {message}")),
            "{}: {shown}",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 5);
}

/// Every prefix of a valid file, and of the shipped example, is either a
/// scenario or a list of located errors: never a panic.
#[test]
fn truncated_files_never_panic() {
    let dir = temp_dir();
    std::fs::write(dir.join("actors.csv"), "name\nA\n").unwrap();
    let path = dir.join("s.yaml");
    for text in [
        DESIGN_EXAMPLE,
        include_str!("../../../../examples/testbed.yaml"),
        include_str!("../../../../examples/theodolite-kafka.yaml"),
        include_str!("../../../../examples/signed-api.yaml"),
    ] {
        // Line ends and a few mid-line cuts keep it fast (regexes compile slowly
        // in debug builds).
        let cuts = text
            .char_indices()
            .filter(|&(i, c)| c == '\n' || i % 23 == 0);
        for (cut, _) in cuts {
            if let Err(Diagnostics(all)) = parse(&text[..cut], &path) {
                assert!(!all.is_empty());
                assert!(
                    all.iter().all(|d| d.line >= 1 && d.column >= 1),
                    "{cut}: {all:?}"
                );
            }
        }
    }
}

#[test]
fn env_variables_expand_in_settings_and_templates_escaped_for_their_place() {
    std::env::set_var("AUTOPERF_SCENARIO_TEST_HOST", "127.0.0.1:18081");
    std::env::set_var("AUTOPERF_SCENARIO_TEST_WHO", "a b\"c");
    let s = ok(r#"
target: {base_url: "http://${env.AUTOPERF_SCENARIO_TEST_HOST}"}
requests:
  home:
    path: "/x?who=${env.AUTOPERF_SCENARIO_TEST_WHO}&d=${env.AUTOPERF_SCENARIO_TEST_UNSET:-none}"
    headers: {X-Who: "${env.AUTOPERF_SCENARIO_TEST_WHO}"}
    json: {who: "${env.AUTOPERF_SCENARIO_TEST_WHO}"}
session: {start: home}
"#);
    assert_eq!(s.target.endpoint.to_string(), "http://127.0.0.1:18081");
    let home = http(&s.requests[0]);
    assert_eq!(render(&home.path), "/x?who=a%20b%22c&d=none");
    assert_eq!(render(&home.headers[0].1), "a b\"c");
    let Some(Body::Json(body)) = &home.body else {
        panic!("a JSON body")
    };
    assert_eq!(render(body), r#"{"who":"a b\"c"}"#);
}

#[test]
fn an_unset_env_variable_is_reported_at_its_line_and_column() {
    let d = expect(
        "target: {base_url: \"http://${env.AUTOPERF_SCENARIO_TEST_NOPE}\"}\nrequests: {home: {path: /}}\nsession: {start: home}\n",
        "`AUTOPERF_SCENARIO_TEST_NOPE` is not set",
        1,
        28,
    );
    assert!(d.hint.unwrap().contains(":-value"));
    expect(
        "target: {base_url: \"http://a\"}\nrequests:\n  home: {path: \"/${env.AUTOPERF_SCENARIO_TEST_NOPE}\"}\nsession: {start: home}\n",
        "`AUTOPERF_SCENARIO_TEST_NOPE` is not set",
        3,
        18,
    );
}

#[test]
fn set_overrides_are_validated_like_the_file_and_named_in_messages() {
    let text = "target: {base_url: \"http://a\"}\nthink_time: 1s\nrequests: {home: {path: /}}\nsession: {start: home}\n";
    let path = temp_dir().join("set.yaml");
    let sets = [
        Override::parse("think_time=200ms").unwrap(),
        Override::parse("requests.home.path=/other").unwrap(),
    ];
    let s = parse_with(text, &path, &sets).unwrap();
    assert_eq!(
        s.think_time,
        ThinkTime::Constant(Duration::from_millis(200))
    );
    assert_eq!(
        s.overrides,
        ["think_time=200ms", "requests.home.path=/other"]
    );
    let bad = [Override::parse("think_time=20x").unwrap()];
    let Diagnostics(d) = parse_with(text, &path, &bad).unwrap_err();
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(
        d[0].message
            .starts_with("--set think_time=20x: expected a duration"),
        "{}",
        d[0]
    );
    let typo = [Override::parse("thinktime=2s").unwrap()];
    let Diagnostics(d) = parse_with(text, &path, &typo).unwrap_err();
    assert!(
        d[0].message
            .starts_with("--set thinktime=2s: unknown key `thinktime`"),
        "{}",
        d[0]
    );
}

#[test]
fn users_stages_ramp_hold_and_step_and_their_errors_are_located() {
    let base =
        "target: {base_url: \"http://a\"}\nrequests: {home: {path: /}}\nsession: {start: home}\n";
    let s = ok(&format!(
        "{base}users: [{{to: 500, over: 2m}}, {{hold: 30s}}, {{to: 100}}]\n"
    ));
    assert_eq!(
        s.users,
        Some(UserStages::Ramp(vec![
            UserStage {
                to: 500,
                over: Duration::from_secs(120)
            },
            UserStage {
                to: 500,
                over: Duration::from_secs(30)
            },
            UserStage {
                to: 100,
                over: Duration::ZERO
            },
        ]))
    );
    assert_eq!(
        ok(&format!("{base}users: 50\n")).users,
        Some(UserStages::All(50))
    );
    expect(
        &format!("{base}users: [{{to: 5, hold: 1s}}]\n"),
        "expected `{to: 500, over: 2m}`",
        4,
        9,
    );
    expect(
        &format!("{base}users: [{{to: 5, over: soon}}]\n"),
        "expected a duration",
        4,
        23,
    );
    expect(
        &format!("{base}users: [{{hold: 5s}}]\n"),
        "reaches at least 1 user",
        4,
        8,
    );
    expect(
        &format!("{base}users: 0\n"),
        "a number of users of at least 1",
        4,
        8,
    );
    expect(
        &format!("{base}users: 5\narrivals: {{rate: 5/s}}\n"),
        "found both",
        4,
        8,
    );
}

#[test]
fn a_request_may_have_its_own_think_time_and_the_mean_weights_visits() {
    let s = ok("target: {base_url: \"http://a\"}\nthink_time: 0s\nrequests:\n  a: {path: /a, think_time: 200ms}\n  b: {path: /b}\nsession:\n  start: a\n  transitions: {a: {b: 1.0}, b: {a: 0.5}}\n");
    assert_eq!(
        s.requests[0].think_time,
        Some(ThinkTime::Constant(Duration::from_millis(200)))
    );
    assert_eq!(
        s.think_after(0, RequestId(1)),
        &ThinkTime::Constant(Duration::ZERO)
    );
    // a and b are visited equally often.
    assert_eq!(s.mean_think_time(), Duration::from_millis(100));
    expect(
        "target: {base_url: \"http://a\"}\nrequests:\n  a: {path: /a, think_time: often}\n",
        "expected a duration",
        3,
        29,
    );
}

#[test]
fn sessions_may_begin_at_several_requests() {
    let s = ok("target: {base_url: 'http://h'}\nrequests: {a: {path: /a}, b: {path: /b}, c: {path: /c}}\nsession:\n  start: {a: 0.6, b: 0.4}\n  transitions: {a: {c: 0.5}}\n");
    assert_eq!(s.session.only_start(), None);
    assert_eq!(
        s.session.entries(),
        &[(RequestId(0), 0.6), (RequestId(1), 0.4)]
    );
    let v = s.session.expected_visits();
    assert!((v[2] - 0.3).abs() < 1e-12, "{v:?}");
    let head =
        "target: {base_url: 'http://h'}\nrequests: {a: {path: /a}, b: {path: /b}}\nsession:\n";
    let d = expect(
        &format!("{head}  start: {{a: 0.5, b: 0.2}}\n"),
        "the probabilities of `session.start` sum to 0.7, expected 1",
        4,
        10,
    );
    assert!(d.hint.is_some());
    expect(
        &format!("{head}  start: {{a: 0.5, x: 0.5}}\n"),
        "unknown request `x` in `session.start`",
        4,
        19,
    );
}

#[test]
fn lognormal_think_times() {
    let s = ok("target: {base_url: 'http://h'}\nthink_time: {lognormal: {mean: 2s, cv: 1.5}}\nrequests: {a: {path: /}}\n");
    assert_eq!(
        s.think_time,
        ThinkTime::LogNormal {
            mean: Duration::from_secs(2),
            cv: 1.5
        }
    );
    // The draws have the mean and spread asked for.
    let n = 200_000;
    let draws: Vec<f64> = (0..n)
        .map(|i| {
            s.think_time
                .sample((i as f64 + 0.5) / n as f64)
                .as_secs_f64()
        })
        .collect();
    let mean = draws.iter().sum::<f64>() / n as f64;
    let sd = (draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
    assert!((mean - 2.0).abs() < 0.05, "{mean}");
    assert!((sd / mean - 1.5).abs() < 0.1, "{}", sd / mean);
    expect(
        "target: {base_url: 'http://h'}\nthink_time: {lognormal: {mean: 2s, cv: 0}}\nrequests: {a: {path: /}}\n",
        "expected a coefficient of variation above 0",
        2,
        40,
    );
}

/// A `when:` decided at load time reshapes the probabilities themselves,
/// so the expected visits follow it; a dynamic one is taken to hold there.
#[test]
fn a_condition_known_at_load_time_renormalises_the_transitions() {
    let scenario = |when: &str| {
        ok(&format!(
            r#"
target: {{base_url: "http://127.0.0.1:9"}}
requests:
  home: {{path: /}}
  search: {{path: /search, extract: {{n: {{json: "$.n"}}}}}}
  buy: {{path: /buy}}
session:
  start: home
  transitions:
    home:
      search: {{p: 0.6, when: "{when}"}}
      buy: 0.2
"#
        ))
    };
    let visits = |s: &Scenario| s.session.expected_visits();
    // Never holds: buy 0.2 / 0.4, the end 0.2 / 0.4.
    let s = scenario("${env.AUTOPERF_SURELY_UNSET:-off} == 'on'");
    assert_eq!(visits(&s), [1.0, 0.0, 0.5]);
    assert!(!s.session.is_conditional(RequestId(0)));
    // Always holds: as written, no condition left to judge.
    let s = scenario("1 < 2");
    assert!((visits(&s)[1] - 0.6).abs() < 1e-12 && (visits(&s)[2] - 0.2).abs() < 1e-12);
    assert!(!s.session.is_conditional(RequestId(0)));
    // Known only as users run: judged then.
    let s = scenario("${n} < 3");
    assert!((visits(&s)[1] - 0.6).abs() < 1e-12);
    assert!(s.session.is_conditional(RequestId(0)));
}

/// A loop whose only way on has a condition ends when the condition
/// fails; conditions may read cookies no request names.
#[test]
fn a_conditional_loop_can_end_and_conditions_read_cookies() {
    let s = ok(r#"
target: {base_url: "http://127.0.0.1:9"}
requests:
  page:
    path: /page
    set: {n: "${n + 1}"}
session:
  start: page
  transitions:
    page: {page: {p: 1, when: "${n} < 3 && ${cookie.sid} != ''"}}
"#);
    assert!(s.session.is_conditional(RequestId(0)));
    assert!(
        s.variables.iter().any(|v| v == "cookie.sid"),
        "{:?}",
        s.variables
    );
}

#[test]
fn a_loop_only_a_condition_ends_has_a_mean_think_time() {
    let s = ok(r#"
target: {base_url: "http://127.0.0.1:9"}
think_time: 1s
requests:
  page: {path: /page, set: {n: "${n + 1}"}, think_time: 2s}
session:
  start: page
  transitions:
    page: {page: {p: 1, when: "${n} < 3"}}
"#);
    assert_eq!(s.mean_think_time(), std::time::Duration::from_secs(1));
}

/// A `skip_if:` that always holds (an `${env.…}` switch) takes its request
/// out of what a session sends, so the figures weighed by visits leave it
/// out; one judged as users run is counted as sent.
#[test]
fn a_request_always_skipped_is_not_among_the_visits_sent() {
    let scenario = |skip: &str| {
        ok(&format!(
            r#"
target: {{base_url: "http://127.0.0.1:9"}}
think_time: 1s
requests:
  home: {{path: /}}
  ads: {{path: /ads, skip_if: "{skip}", think_time: 5s}}
session:
  start: home
  transitions:
    home: {{ads: 1}}
"#
        ))
    };
    let s = scenario("${env.AUTOPERF_SURELY_UNSET:-on} == 'on'");
    assert_eq!(s.session.expected_visits(), [1.0, 1.0]);
    assert_eq!(s.expected_sent_visits(), [1.0, 0.0]);
    assert_eq!(s.mean_think_time(), std::time::Duration::from_secs(1));
    let s = scenario("status == 500");
    assert_eq!(s.expected_sent_visits(), [1.0, 1.0]);
    assert_eq!(s.mean_think_time(), std::time::Duration::from_secs(3));
}
