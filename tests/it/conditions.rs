//! Conditions end to end: examples/shop-cart-limit.yaml keeps adding to a
//! cart while the count the shop answered is under 3 (`when:`) and skips
//! the checkout of an empty cart (`skip_if:`); the shop's own counters say
//! no cart went past 3, and the same journey without the limit fills carts
//! far past it. `check` places a condition's mistakes in the file.

use crate::shop::stats;
use crate::support;

use std::path::Path;

fn run(scenario: &Path, out: &Path) -> serde_json::Value {
    let (code, stdout, stderr) = support::run_briefly(scenario.to_str().unwrap(), "6", out);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    support::run_json(out)["levels"][0].clone()
}

#[test]
fn a_cart_limit_driven_by_the_shops_answers_holds_and_an_empty_checkout_is_skipped() {
    let tb = support::testbed(1);
    let dir = support::scratch_dir("cart-limit");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("examples/shop-cart-limit.yaml"))
        .unwrap()
        .replace("http://127.0.0.1:8080", &tb.web_url);
    let limited = dir.join("limited.yaml");
    std::fs::write(&limited, &text).unwrap();

    let level = run(&limited, &dir.join("limited"));
    assert_eq!(level["errors"], 0, "{level}");
    let per = &level["per_request"];
    for (name, request) in per.as_object().unwrap() {
        for (check, count) in request["checks"].as_object().unwrap() {
            assert_eq!(count["failed"], 0, "{name}.{check}: {count}");
        }
    }
    // An empty cart's checkout was reached and not sent: the shop would
    // have answered 409 and the check failed.
    assert!(per["checkout"]["skipped"].as_u64() > Some(0), "{per}");
    assert!(per["checkout"]["requests"].as_u64() > Some(0), "{per}");
    // The report says so beside the checkout's count.
    let html = std::fs::read_to_string(dir.join("limited/report.html")).unwrap();
    assert!(html.contains("(skipped "), "no skip count in the report");
    let shop = stats(tb.web_addr);
    // Carts reached the limit, and none went past it.
    assert_eq!(shop["largest_cart"], 3, "{shop}");
    // Every add measured reached the shop; at the level's end an add in
    // flight may have reached it unmeasured, one per user at most.
    let adds = per["add"]["requests"].as_u64().unwrap();
    let added = shop["carts_added"].as_u64().unwrap();
    assert!((adds..=adds + 6).contains(&added), "{adds} adds: {shop}");

    // The same journey with the limit out of reach: the loop's 0.8 fills
    // carts well past 3 in the same time (each cart's size is geometric).
    let unlimited = dir.join("unlimited.yaml");
    assert!(text.contains(r#"when: "${count} < 3""#));
    std::fs::write(
        &unlimited,
        text.replace(r#"when: "${count} < 3""#, r#"when: "${count} < 1000""#),
    )
    .unwrap();
    run(&unlimited, &dir.join("unlimited"));
    let shop = stats(tb.web_addr);
    assert!(shop["largest_cart"].as_u64() > Some(3), "{shop}");
}

#[test]
fn a_conditions_mistakes_are_placed_in_the_file_with_the_fix() {
    let dir = support::scratch_dir("conditions-check");
    let path = dir.join("bad.yaml");
    std::fs::write(
        &path,
        r#"target: {base_url: "http://127.0.0.1:9"}
requests:
  cart:
    path: /cart
    extract: {count: {json: "$.count"}}
  add:
    path: /add
    skip_if: "count >= 3"
session:
  start: cart
  transitions:
    cart: {add: {p: 0.5, when: "${cuont} < 3"}}
"#,
    )
    .unwrap();
    let (code, stdout, stderr) = support::autoperf(&["check", path.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    let file = path.display().to_string();
    // The variable misspelt, at its column, with the name it is close to.
    assert!(stderr.contains(&format!("{file}:12:")), "{stderr}");
    assert!(
        stderr.contains("cuont") && stderr.contains("count"),
        "{stderr}"
    );
    // A bare name: read as `${count}`.
    assert!(stderr.contains(&format!("{file}:8:")), "{stderr}");
    assert!(
        stderr.contains("unknown name `count` in a condition"),
        "{stderr}"
    );
    assert!(stderr.contains("`${count}`"), "{stderr}");
}
