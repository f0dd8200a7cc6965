//! The report rendered from real results directories kept under
//! `testdata/` (a capacity analysis, a profile and a run of the testbed),
//! with a golden file for the capacity report: set `UPDATE_GOLDEN=1` to
//! rewrite it after an intended change.

use std::path::{Path, PathBuf};

use super::*;

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/report/html/testdata")
        .join(name)
}

fn rendered(name: &str) -> String {
    let dir = testdata(name);
    let record: RunRecord =
        serde_json::from_str(&fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    let series = read_series(&dir.join("timeseries.csv")).unwrap();
    let lag = read_lag_series(&dir.join("lag_series.csv")).unwrap();
    render(&record, &series, &lag, None)
}

fn count(html: &str, needle: &str) -> usize {
    html.matches(needle).count()
}

/// Nothing in the page may make the browser fetch anything.
fn assert_self_contained(html: &str) {
    for bad in [
        "<script", "src=", "href=", "url(", "@import", "<link", "<img", "<iframe",
    ] {
        assert!(!html.contains(bad), "the report contains {bad}");
    }
}

#[test]
fn capacity_report_draws_the_curves_and_marks() {
    let html = rendered("capacity");
    assert_self_contained(&html);
    // 6 levels: throughput (6), mean/p90/p99 (18), CPU of 2 tiers (12),
    // achieved and configured think time (12) = 48 points against users.
    // Rows covering less than half a second (a level's last sliver) are
    // left out of the charts.
    let series = read_series(&testdata("capacity/timeseries.csv")).unwrap();
    let series_rows = series
        .iter()
        .enumerate()
        .filter(|(i, r)| {
            *i == 0 || r.level != series[i - 1].level || r.t_s - series[i - 1].t_s >= 0.5
        })
        .count();
    // Per level over time: throughput, p50, p99 for each row.
    assert_eq!(count(&html, "<circle class=\"pt "), 48 + 3 * series_rows);
    assert!(html.contains("N* ≈ 122"));
    assert!(html.contains("saturation 131"));
    assert!(html.contains("web (bottleneck)"));
    assert!(html.contains(">db, web: 1 core<"));
    assert_eq!(count(&html, "<section class=\"level\""), 6);
    assert_eq!(count(&html, ">warm-up</text>"), 12);
    assert!(html.contains(
        "<pre>name: cpu-bottleneck\ntarget: {base_url: &quot;http://127.0.0.1:18081&quot;}"
    ));
}

#[test]
fn capacity_report_matches_golden() {
    let html = rendered("capacity");
    assert_eq!(html, rendered("capacity"), "rendering is deterministic");
    let golden = testdata("capacity.golden.html");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        fs::write(&golden, &html).unwrap();
    }
    let want = fs::read_to_string(&golden).expect("golden file (UPDATE_GOLDEN=1 writes it)");
    assert!(
        html == want,
        "report differs from {}; rerun with UPDATE_GOLDEN=1 if intended",
        golden.display()
    );
}

#[test]
fn profile_report_has_the_demand_table_and_bars() {
    let html = rendered("profile");
    assert_self_contained(&html);
    // 4 requests × 2 tiers.
    assert_eq!(count(&html, "<rect class=\"bar "), 8);
    assert!(html.contains("Resource demands per request"));
    assert!(html.contains("(ignored: tb-db)"));
    // All levels at the same load: no curves against users.
    assert!(!html.contains("Throughput vs users"));
}

#[test]
fn run_report_summarises_the_totals() {
    let html = rendered("run");
    assert_self_contained(&html);
    assert!(html.contains("Load run"));
    assert!(html.contains("<dt>Throughput</dt>"));
    assert_eq!(count(&html, "<circle class=\"pt "), 3 * 8);
    assert!(!html.contains("Throughput vs users"));
}

#[test]
fn client_bottleneck_levels_are_warned_and_highlighted() {
    let dir = testdata("capacity");
    let mut record: RunRecord =
        serde_json::from_str(&fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    record.levels[5].client_bottleneck = true;
    record.analysis.thresholds = Some(
        serde_json::from_value(serde_json::json!([{"source": "p99 < 1ms", "passed": false, "actual": 2.5, "bound": 1.0, "unit": "ms"}]))
            .unwrap(),
    );
    let html = render(&record, &[], &[], None);
    assert!(html.contains("Client bottleneck at level 6 (143 users)"));
    // Throughput, response time and think time charts flag the level.
    assert_eq!(count(&html, "<circle class=\"hl bad\""), 3);
    assert!(html.contains("<rect class=\"band bad\""));
    assert!(html.contains("<tr class=\"cb\">"));
    assert!(html.contains("<code>p99 &lt; 1ms</code>"));
    assert!(html.contains("2.500 ms"));
}

#[test]
fn write_report_reads_a_results_directory() {
    let dir = std::env::temp_dir().join(format!("autoperf-html-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    for f in ["run.json", "timeseries.csv"] {
        fs::copy(testdata("run").join(f), dir.join(f)).unwrap();
    }
    let out = write_report(&dir).unwrap();
    assert_eq!(out, dir.join("report.html"));
    assert!(fs::read_to_string(&out)
        .unwrap()
        .starts_with("<!DOCTYPE html>"));
    fs::remove_file(dir.join("timeseries.csv")).unwrap();
    write_report(&dir).expect("a missing series is an empty one");
    fs::remove_file(dir.join("run.json")).unwrap();
    assert!(matches!(write_report(&dir), Err(ReportError::Record(_))));
    fs::remove_dir_all(&dir).unwrap();
}

/// The fixture's record, and the queueing model of its own demands.
fn predicted(name: &str) -> (RunRecord, crate::model::Prediction) {
    use crate::model::predict::{self, Ask};
    let dir = testdata(name);
    let record: RunRecord =
        serde_json::from_str(&fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    let scenario =
        crate::scenario::parse(&record.scenario.text, Path::new(&record.scenario.file)).unwrap();
    let model = crate::model::Model::from_record(&record, &scenario).unwrap();
    let measured: Vec<LevelRecord> = match record.analysis.capacity {
        Some(_) => record.levels.clone(),
        None => Vec::new(),
    };
    let users = (1..=300).step_by(3).collect();
    let p = predict::predict(&model, &Ask::Users(users), &measured);
    (record, p)
}

#[test]
fn the_model_is_drawn_over_the_measured_curves_and_set_against_each_level() {
    let (record, mut p) = predicted("capacity");
    let plain = render(&record, &[], &[], None);
    let html = render(&record, &[], &[], Some(&p));
    assert_self_contained(&html);
    assert!(!plain.contains("Queueing model"));
    assert!(html.contains("<h2>Queueing model</h2>"));
    // Throughput and response time each gain a dashed model line, with no
    // circle per computed point, cut at the last measured level.
    assert_eq!(count(&html, "class=\"line s3 dashed\""), 2);
    assert_eq!(
        count(&html, "<circle class=\"pt "),
        count(&plain, "<circle class=\"pt ")
    );
    // One row per measured level in the comparison table.
    assert_eq!(p.measured.len(), record.levels.len());
    assert!(html.contains("RMS error"));
    assert!(!html.contains("something the model does not see"));
    p.measured[0].model_untrusted = true;
    let html = render(&record, &[], &[], Some(&p));
    assert!(html.contains("At 1 users the measured throughput is more than 15% below"));
}

#[test]
fn a_profiles_model_gets_charts_of_its_own() {
    let (record, p) = predicted("profile");
    assert!(p.measured.is_empty());
    let html = render(&record, &[], &[], Some(&p));
    assert!(html.contains("Model: throughput vs users"));
    assert_eq!(count(&html, "class=\"line s3 dashed\""), 2);
    assert!(!html.contains("Model against the measured levels"));
}

#[test]
fn a_broken_prediction_file_is_named_with_the_fix() {
    let dir = std::env::temp_dir().join(format!("autoperf-html-pred-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    fs::copy(testdata("run").join("run.json"), dir.join("run.json")).unwrap();
    fs::write(dir.join("prediction.json"), "{\"model\": 1}").unwrap();
    let e = write_report(&dir).unwrap_err().to_string();
    assert!(
        e.contains("prediction.json") && e.contains("autoperf predict"),
        "{e}"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn levels_with_intervals_get_error_bars_around_their_points() {
    let dir = testdata("capacity");
    let mut record: RunRecord =
        serde_json::from_str(&fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    let series = read_series(&dir.join("timeseries.csv")).unwrap();
    assert!(!render(&record, &series, &[], None).contains("class=\"err"));
    let first = &mut record.levels[0];
    first.ci95 = Some(crate::measure::Ci95 {
        batches: 20,
        batch_s: 1.0,
        throughput_rps: 2.5,
        throughput_from: None,
        response_time_ms: Some(crate::measure::precision::LatencyHalfWidths {
            mean: 0.5,
            p50: 0.4,
            p90: 0.8,
            p95: 1.0,
            p99: 3.0,
        }),
    });
    let (x, users) = (first.throughput_rps, first.users.unwrap());
    let p99 = first.response_time_ms.p99;
    let html = render(&record, &series, &[], None);
    // One bar on the throughput curve, two on the response times (mean and
    // p99), each spanning the point ± its half-width.
    assert_eq!(count(&html, "<path class=\"err s0\""), 2, "{html}");
    assert_eq!(count(&html, "<path class=\"err s4\""), 1);
    let bar = format!(
        "data-x=\"{}\" data-lo=\"{}\" data-hi=\"{}\"",
        crate::report::svg::num(f64::from(users)),
        crate::report::svg::num(x - 2.5),
        crate::report::svg::num(x + 2.5)
    );
    assert!(html.contains(&bar), "{bar}");
    assert!(html.contains(&format!(
        "data-hi=\"{}\"",
        crate::report::svg::num(p99 + 3.0)
    )));
}

/// An open search judged by a consumer group's lag (a real run: a consumer
/// of about 490 records/s, `lag_trend < 20/s`): the lag trend is drawn
/// against the offered rate, one point a level, the SLO's bound with it.
#[test]
fn an_open_search_judged_by_lag_draws_the_lag_trend_against_the_rate() {
    let html = rendered("open-lag");
    let at = html
        .find("Consumer lag trend against offered rate")
        .expect("the lag chart");
    let chart = &html[at..];
    let chart = &chart[..chart.find("</figure>").unwrap()];
    // Nine levels, each a marker of the group's series.
    assert_eq!(count(chart, "<circle"), 9, "{chart}");
    assert!(chart.contains("lag_trend(proc-29412) &lt; 20/s"), "{chart}");
    // The other runs draw none.
    assert!(!rendered("capacity").contains("Consumer lag trend"));
}

/// A run whose stream processor fell behind (a real run: tb-con at 2 ms a
/// record, 2,000 records/s offered, `lag(stream-app) < 5000` failed at
/// 9,465): the level draws its group's lag through the window, a marker a
/// reading.
#[test]
fn a_level_that_watched_a_consumer_group_draws_its_lag_over_time() {
    let dir = testdata("run-lag");
    let html = rendered("run-lag");
    let at = html
        .find("Level 1: consumer lag over time")
        .expect("the level's lag chart");
    let chart = &html[at..];
    let chart = &chart[..chart.find("</figure>").unwrap()];
    let readings = read_lag_series(&dir.join("lag_series.csv")).unwrap();
    assert!(readings.len() >= 4, "{readings:?}");
    assert_eq!(count(chart, "<circle"), readings.len(), "{chart}");
    // A level without lag readings draws none.
    assert!(!rendered("capacity").contains("consumer lag over time"));
}

#[test]
fn lag_series_rows_keep_commas_in_group_names_and_name_a_bad_line() {
    let dir = std::env::temp_dir().join(format!("autoperf-lag-csv-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("lag_series.csv");
    fs::write(
        &path,
        "window_s,level,group,lag_records\n0.5,2,a,b,120\n1.5,2,g,7\n",
    )
    .unwrap();
    let rows = read_lag_series(&path).unwrap();
    assert_eq!(rows[0].group, "a,b");
    assert_eq!((rows[0].level, rows[0].lag_records), (2, 120));
    assert_eq!(rows[1].window_s, 1.5);
    fs::write(&path, "window_s,level,group,lag_records\n0.5,2,g,many\n").unwrap();
    let err = read_lag_series(&path).unwrap_err().to_string();
    assert!(err.contains("line 2"), "{err}");
    assert!(read_lag_series(&dir.join("absent.csv")).unwrap().is_empty());
    let _ = fs::remove_dir_all(&dir);
}
