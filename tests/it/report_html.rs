//! `report.html` of real results, opened in headless Chromium: the testbed
//! is measured by the built binary (`autoperf run`, and `autoperf capacity`
//! with two manual levels), the report is written from the results
//! directory, and the browser must build the charts' points, log nothing
//! to the console and ask the network for nothing.

use crate::browser;

use std::path::{Path, PathBuf};

use autoperf_core::report::html::write_report;

fn exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_autoperf"))
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("autoperf-report-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn autoperf(args: &[&str]) {
    let out = std::process::Command::new(exe())
        .args(args)
        .output()
        .expect("autoperf runs");
    assert!(
        out.status.success(),
        "autoperf {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

/// Attributes and CSS through which a page could fetch something (a link
/// within the page, `href="#level-3"`, fetches nothing).
fn assert_fetches_nothing(html: &str) {
    for bad in [
        "<script", "<link", "<img", "<iframe", "src=", "url(", "@import",
    ] {
        assert!(!html.contains(bad), "the report contains `{bad}`");
    }
    assert_eq!(
        count(html, "href="),
        count(html, "href=\"#"),
        "the report links outside itself"
    );
}

/// Opens the report in Chromium and checks what the browser made of it;
/// returns the number of data points in the DOM.
fn check_in_browser(chromium: &Path, report: &Path, work: &Path) -> usize {
    let html = std::fs::read_to_string(report).unwrap();
    assert_fetches_nothing(&html);
    let page = browser::load(chromium, report, work);
    assert!(
        page.console.is_empty(),
        "console output: {:?}",
        page.console
    );
    assert!(
        page.page_requests.is_empty(),
        "network requests: {:?}",
        page.page_requests
    );
    let svgs = count(&page.dom, "<svg class=\"chart\" viewBox=");
    assert!(svgs >= 2, "only {svgs} charts in the DOM");
    assert_eq!(
        svgs,
        count(&page.dom, "width=\"100%\""),
        "every chart scales"
    );
    let points = count(&page.dom, "<circle class=\"pt ");
    assert_eq!(
        points,
        count(&html, "<circle class=\"pt "),
        "the DOM has every point"
    );
    assert_eq!(
        count(&page.dom, "<path class=\"err "),
        count(&html, "<path class=\"err "),
        "the DOM has every error bar"
    );
    points
}

#[test]
fn the_browser_checks_catch_a_leaky_page() {
    let Some(chromium) = browser::chromium_or_skip("the_browser_checks_catch_a_leaky_page") else {
        return;
    };
    let dir = scratch("leaky");
    let page = dir.join("leaky.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><img src=\"http://example.com/x.png\">\
         <div style=\"background:url(https://example.org/b.png)\">x</div>\
         <script>console.error('boom')</script></body></html>",
    )
    .unwrap();
    let loaded = browser::load(&chromium, &page, &dir.join("work"));
    assert_eq!(
        loaded.page_requests,
        ["http://example.com/x.png", "https://example.org/b.png"],
        "both fetches seen"
    );
    assert_eq!(loaded.console.len(), 1, "{:?}", loaded.console);
    assert!(loaded.console[0].contains("boom"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reports_of_a_real_run_and_capacity_analysis_render_in_chromium() {
    let test = "reports_of_a_real_run_and_capacity_analysis_render_in_chromium";
    let Some(chromium) = browser::chromium_or_skip(test) else {
        return;
    };
    let tb = autoperf_testbed::Testbed::spawn(&exe(), &Default::default()).expect("testbed starts");
    let dir = scratch("real");
    let scenario = dir.join("shop.yaml");
    std::fs::write(
        &scenario,
        format!(
            "name: report-test\ntarget: {{base_url: \"{}\"}}\nthink_time: 20ms\nrequests:\n  home: {{path: \"/cpu?ms=0.2\"}}\n  search: {{path: \"/cpu?ms=0.5\"}}\nsession:\n  start: home\n  transitions:\n    home: {{search: 0.5}}\nthresholds:\n  - \"p99 < 5s\"\n",
            tb.web_url
        ),
    )
    .unwrap();
    let s = scenario.to_str().unwrap();

    let run = dir.join("run");
    let run_s = run.to_str().unwrap();
    autoperf(&[
        "run",
        s,
        "--users",
        "4",
        "--duration",
        "3s",
        "--warmup",
        "1s",
        "--no-agents",
        "--quiet",
        "--out",
        run_s,
    ]);
    let report = write_report(&run).expect("report written");
    assert_eq!(report, run.join("report.html"));
    let points = check_in_browser(&chromium, &report, &dir.join("browser-run"));
    // p50, p99 and throughput for each of at least 3 seconds.
    assert!(points >= 9, "{points} points in the run report");

    let cap = dir.join("capacity");
    let cap_s = cap.to_str().unwrap();
    autoperf(&[
        "capacity",
        s,
        "--levels",
        "5,20",
        "--duration",
        "5s",
        "--no-agents",
        "--out",
        cap_s,
    ]);
    let report = write_report(&cap).expect("report written");
    let html = std::fs::read_to_string(&report).unwrap();
    for caption in [
        "Throughput vs users",
        "Response time vs users",
        "Think time: achieved vs configured",
    ] {
        assert!(html.contains(caption), "no chart `{caption}`");
    }
    assert!(html.contains("Not measured: the run had no profiler agents."));
    let points = check_in_browser(&chromium, &report, &dir.join("browser-capacity"));
    // Against users: throughput 2, mean/p90/p99 6, think time 4; then
    // p50, p99 and throughput for each second of both levels.
    assert!(
        points >= 12 + 2 * 3 * 3,
        "{points} points in the capacity report"
    );
    // Five seconds are five batches: each level's throughput, mean and
    // p99 carry their 95% interval as a bar.
    assert_eq!(count(&html, "<path class=\"err "), 2 * 3, "error bars");

    if let Some(shots) = std::env::var_os("AUTOPERF_SCREENSHOTS") {
        let shots = PathBuf::from(shots);
        std::fs::create_dir_all(&shots).unwrap();
        let work = dir.join("shots");
        browser::screenshot(
            &chromium,
            &run.join("report.html"),
            &shots.join("run-report.png"),
            1280,
            2000,
            &work,
        );
        browser::screenshot(
            &chromium,
            &report,
            &shots.join("capacity-report.png"),
            1280,
            2400,
            &work,
        );
    }
    drop(tb);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The report of a real open search judged by a consumer group's lag (kept
/// in the core's report test data): the browser builds the lag trend's
/// chart, one point a level.
#[test]
fn an_open_search_judged_by_lag_renders_its_lag_chart_in_chromium() {
    let test = "an_open_search_judged_by_lag_renders_its_lag_chart_in_chromium";
    let Some(chromium) = browser::chromium_or_skip(test) else {
        return;
    };
    let dir = scratch("open-lag");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/core/src/report/html/testdata/open-lag");
    let results = dir.join("results");
    std::fs::create_dir_all(&results).unwrap();
    for file in ["run.json", "timeseries.csv"] {
        std::fs::copy(fixture.join(file), results.join(file)).unwrap();
    }
    let report = write_report(&results).expect("report written");
    check_in_browser(&chromium, &report, &dir.join("browser"));
    let page = browser::load(&chromium, &report, &dir.join("browser-lag"));
    let at = page
        .dom
        .find("Consumer lag trend against offered rate")
        .expect("the lag chart in the DOM");
    let chart = &page.dom[at..];
    let chart = &chart[..chart.find("</figure>").unwrap()];
    assert_eq!(count(chart, "<circle class=\"pt "), 9, "one point a level");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The report of a real run whose stream processor fell behind (tb-con,
/// kept in the core's report test data), written from its results files
/// as `autoperf report` writes it: the browser builds the level's lag over
/// time, one point a reading of `lag_series.csv`.
#[test]
fn a_levels_lag_over_time_renders_in_chromium() {
    let test = "a_levels_lag_over_time_renders_in_chromium";
    let Some(chromium) = browser::chromium_or_skip(test) else {
        return;
    };
    let dir = scratch("run-lag");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/core/src/report/html/testdata/run-lag");
    let results = dir.join("results");
    std::fs::create_dir_all(&results).unwrap();
    for file in ["run.json", "timeseries.csv", "lag_series.csv"] {
        std::fs::copy(fixture.join(file), results.join(file)).unwrap();
    }
    let readings = std::fs::read_to_string(fixture.join("lag_series.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .count();
    let report = write_report(&results).expect("report written");
    check_in_browser(&chromium, &report, &dir.join("browser"));
    let page = browser::load(&chromium, &report, &dir.join("browser-lag"));
    let at = page
        .dom
        .find("Level 1: consumer lag over time")
        .expect("the lag chart in the DOM");
    let chart = &page.dom[at..];
    let chart = &chart[..chart.find("</figure>").unwrap()];
    assert_eq!(
        count(chart, "<circle class=\"pt "),
        readings,
        "one point a reading"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
