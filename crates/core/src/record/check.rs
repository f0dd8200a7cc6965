//! A record read back (`report`, `compare`, `predict`, `--baseline`,
//! `--resume`) is checked before anything is made of it: a version this
//! autoperf knows, and figures that can be measurements — finite, and not
//! negative where no measurement is. A tampered or broken file is refused
//! naming the key and what is wrong, instead of being read as if true (a
//! negative throughput once came out of `compare` as a −2664% change).

use super::{Latency, LevelRecord, RunRecord, RECORD_VERSION};

/// Larger than any figure a run measures (1e15 ms is 30,000 years; 1e15
/// req/s no system serves): past it, a number was not measured.
pub const MAX_FIGURE: f64 = 1e15;

impl RunRecord {
    /// Why this record cannot be what autoperf wrote, if it cannot: the
    /// key (`levels[2].throughput_rps`) and what is wrong with it.
    pub fn implausible(&self) -> Option<String> {
        if self.record_version == 0 || self.record_version > RECORD_VERSION {
            return Some(format!(
                "record_version is {}: this autoperf reads versions 1 to {RECORD_VERSION} (a newer autoperf wrote it?)",
                self.record_version
            ));
        }
        let levels = self.levels.iter().map(|l| ("levels", l));
        let superseded = self.superseded.iter().map(|l| ("superseded", l));
        levels
            .chain(superseded)
            .enumerate()
            .find_map(|(i, (list, level))| {
                let i = match list {
                    "levels" => i,
                    _ => i - self.levels.len(),
                };
                level.implausible().map(|why| format!("{list}[{i}].{why}"))
            })
    }
}

impl LevelRecord {
    /// Why this level's figures cannot be measurements, if they cannot:
    /// the key within the level and what is wrong.
    pub(crate) fn implausible(&self) -> Option<String> {
        let mut figures: Vec<(String, f64)> = vec![
            ("duration_s".into(), self.duration_s),
            ("warmup_s".into(), self.warmup_s),
            ("throughput_rps".into(), self.throughput_rps),
            (
                "think_time_s.configured".into(),
                self.think_time_s.configured,
            ),
            ("client.cpu_util_cores".into(), self.client.cpu_util_cores),
        ];
        figures.extend(latency("response_time_ms", &self.response_time_ms));
        if let Some(rate) = self.rate_rps {
            figures.push(("rate_rps".into(), rate));
        }
        if let Some(rate) = self.achieved_rate_rps {
            figures.push(("achieved_rate_rps".into(), rate));
        }
        for (name, r) in &self.per_request {
            figures.push((
                format!("per_request.{name}.throughput_rps"),
                r.throughput_rps,
            ));
            figures.extend(latency(
                &format!("per_request.{name}.response_time_ms"),
                &r.response_time_ms,
            ));
        }
        for (tier, usage) in &self.servers {
            let key = |what: &str| format!("servers.{tier}.{what}");
            figures.push((key("cpu_util_cores"), usage.cpu_util_cores));
            figures.push((key("host_steal_cores"), usage.host_steal_cores));
            for (process, ms) in &usage.cpu_ms_per_request {
                figures.push((key(&format!("cpu_ms_per_request.{process}")), *ms));
            }
            for (process, &share) in &usage.cpu_wait_share_per_process {
                let key = key(&format!("cpu_wait_share_per_process.{process}"));
                if share > 1.0 {
                    return Some(format!("{key} is {share}: a share is at most 1"));
                }
                figures.push((key, share));
            }
        }
        unmeasurable(
            figures.iter().map(|(k, v)| (k.as_str(), *v)),
            self.errors,
            self.requests,
        )
    }
}

/// The first figure no measurement gives — not finite, negative, or past
/// `MAX_FIGURE` — or more errors than requests, said with its key.
pub fn unmeasurable<'a>(
    figures: impl IntoIterator<Item = (&'a str, f64)>,
    errors: u64,
    requests: u64,
) -> Option<String> {
    if let Some((key, value)) = figures
        .into_iter()
        .find(|(_, v)| !(0.0..=MAX_FIGURE).contains(v))
    {
        return Some(format!(
            "{key} is {value}: a measurement is a finite number, not negative, and short of 1e15"
        ));
    }
    (errors > requests).then(|| format!("errors is {errors}, more than its {requests} requests"))
}

fn latency(key: &str, l: &Latency) -> [(String, f64); 6] {
    [
        (format!("{key}.mean"), l.mean),
        (format!("{key}.p50"), l.p50),
        (format!("{key}.p90"), l.p90),
        (format!("{key}.p95"), l.p95),
        (format!("{key}.p99"), l.p99),
        (format!("{key}.max"), l.max),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> RunRecord {
        serde_json::from_str(include_str!("../report/html/testdata/run/run.json"))
            .expect("the fixture is a run record")
    }

    #[test]
    fn what_autoperf_wrote_passes_and_tampered_figures_are_named() {
        let run = fixture();
        assert_eq!(run.implausible(), None);
        let mut negative = fixture();
        negative.levels[0].throughput_rps = -2664.0;
        assert_eq!(
            negative.implausible().as_deref(),
            Some(
                "levels[0].throughput_rps is -2664: a measurement is a finite number, not negative, and short of 1e15"
            )
        );
        let mut p99 = fixture();
        p99.levels[0].response_time_ms.p99 = -1.0;
        assert!(p99
            .implausible()
            .is_some_and(|e| e.starts_with("levels[0].response_time_ms.p99 is -1")));
        let mut huge = fixture();
        huge.levels[0].response_time_ms.max = 1e308;
        assert!(huge
            .implausible()
            .is_some_and(|e| e.starts_with("levels[0].response_time_ms.max is 1000")));
        let mut future = fixture();
        future.record_version = 999;
        assert!(future
            .implausible()
            .is_some_and(|e| e.starts_with("record_version is 999")));
        let mut share = fixture();
        let web = share.levels[0].servers.get_mut("web").unwrap();
        web.cpu_wait_share_per_process.insert("tb-web".into(), 1.5);
        assert_eq!(
            share.implausible().as_deref(),
            Some("levels[0].servers.web.cpu_wait_share_per_process.tb-web is 1.5: a share is at most 1")
        );
        let mut steal = fixture();
        steal.levels[0]
            .servers
            .get_mut("db")
            .unwrap()
            .host_steal_cores = f64::NAN;
        assert!(steal
            .implausible()
            .is_some_and(|e| e.starts_with("levels[0].servers.db.host_steal_cores is NaN")));
        let mut errors = fixture();
        errors.levels[0].errors = errors.levels[0].requests + 1;
        assert!(errors
            .implausible()
            .is_some_and(|e| e.contains("more than its")));
    }
}
