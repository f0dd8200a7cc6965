//! `levels.csv`: one row per load level, for spreadsheets. The columns are
//! fixed except for one `cpu_cores_<tier>` column per tier seen in any level
//! (empty where a level has no reading for that tier).

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use crate::record::LevelRecord;

const FIXED: [&str; 16] = [
    "level",
    "users",
    "rate_rps",
    "duration_s",
    "requests",
    "errors",
    "throughput_rps",
    "mean_ms",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "max_ms",
    "think_configured_s",
    "think_achieved_s",
    "client_bottleneck",
    "steady_state",
];

/// Renders the levels as CSV with a header line.
pub fn levels_csv(levels: &[LevelRecord]) -> String {
    let tiers: BTreeSet<&str> = levels
        .iter()
        .flat_map(|l| l.servers.keys().map(String::as_str))
        .collect();
    let mut w = ::csv::Writer::from_writer(Vec::new());
    let header = FIXED
        .iter()
        .map(|s| s.to_string())
        .chain(tiers.iter().map(|t| format!("cpu_cores_{t}")));
    w.write_record(header).expect("writing to memory");
    for l in levels {
        let rt = &l.response_time_ms;
        let opt = |v: Option<String>| v.unwrap_or_default();
        let mut row = vec![
            l.level.to_string(),
            opt(l.users.map(|u| u.to_string())),
            opt(l.rate_rps.map(|r| r.to_string())),
            l.duration_s.to_string(),
            l.requests.to_string(),
            l.errors.to_string(),
            l.throughput_rps.to_string(),
            rt.mean.to_string(),
            rt.p50.to_string(),
            rt.p90.to_string(),
            rt.p99.to_string(),
            rt.max.to_string(),
            l.think_time_s.configured.to_string(),
            l.think_time_s.achieved.to_string(),
            l.client_bottleneck.to_string(),
            l.steady_state.to_string(),
        ];
        row.extend(
            tiers
                .iter()
                .map(|t| opt(l.servers.get(*t).map(|s| s.cpu_util_cores.to_string()))),
        );
        w.write_record(&row).expect("writing to memory");
    }
    String::from_utf8(w.into_inner().expect("writing to memory")).expect("CSV of UTF-8 fields")
}

/// Writes `dir/levels.csv` and returns its path.
pub fn write_levels_csv(dir: &Path, levels: &[LevelRecord]) -> io::Result<PathBuf> {
    let path = dir.join("levels.csv");
    std::fs::write(&path, levels_csv(levels))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level_from_json(users: u32, tiers: &[(&str, f64)]) -> LevelRecord {
        let servers: serde_json::Map<String, serde_json::Value> = tiers
            .iter()
            .map(|(t, c)| {
                (
                    t.to_string(),
                    serde_json::json!({
                        "agent": "a", "cores": 1, "cpu_util_cores": c,
                        "cpu_util_cores_per_process": {}, "cpu_ms_per_request": {},
                        "net_bytes_per_request": {"rx": 0.0, "tx": 0.0},
                        "disk_bytes_per_request": {"read": 0.0, "write": 0.0},
                        "host_disk_bytes_per_request": {"read": 0.0, "write": 0.0},
                        "host_cpu_util_cores": 0.0, "window_s": 1.0
                    }),
                )
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "level": users, "users": users, "rate_rps": null, "duration_s": 10.0,
            "warmup_s": 1.0, "started_at": "x", "requests": 100, "errors": 1,
            "sessions": 10, "throughput_rps": 10.5,
            "response_time_ms": {"mean": 1.5, "p50": 1.0, "p90": 2.0, "p95": 2.5, "p99": 3.0, "max": 9.0},
            "think_time_s": {"configured": 1.0, "achieved": 1.25, "measured": 1.0},
            "client_bottleneck": users > 5, "steady_state": true, "interrupted": false,
            "little": {"users": 1.0, "x_r_plus_z": 1.0, "relative_gap": 0.0},
            "client": {"cpu_util_cores": 0.1, "cores": 2,
                       "timer_lateness_ms": {"p50": 0.0, "p99": 0.0, "max": 0.0},
                       "connect_ms": 0.0, "connects": 0},
            "per_request": {}, "servers": servers
        }))
        .expect("a valid level")
    }

    #[test]
    fn one_row_per_level_and_a_column_per_tier() {
        let levels = [
            level_from_json(1, &[("web", 0.25)]),
            level_from_json(10, &[("web", 0.9), ("db", 0.5)]),
        ];
        let text = levels_csv(&levels);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].ends_with("client_bottleneck,steady_state,cpu_cores_db,cpu_cores_web"));
        assert_eq!(
            lines[1],
            "1,1,,10,100,1,10.5,1.5,1,2,3,9,1,1.25,false,true,,0.25"
        );
        assert_eq!(
            lines[2],
            "10,10,,10,100,1,10.5,1.5,1,2,3,9,1,1.25,true,true,0.5,0.9"
        );
    }
}
