//! `run.json`'s `plan` for a capacity analysis: what it was asked for —
//! manual levels and their duration, the search strategy, an open search
//! and its first rate, agents or not, the `--set`s — so that `capacity
//! --resume DIR` continues exactly what was started there. Flags left out
//! are taken from the plan; a flag asking for something else is refused
//! rather than silently starting another analysis in the same directory.
//!
//! The record keeps `plan` as untyped JSON (`RunRecord::plan`): a plan
//! this version cannot read is then an error of `--resume` alone, not of
//! every reader of run.json. The keys are the record's (sorted, as a JSON
//! value's are).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::scenario::{Override, SearchStrategy};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CapacityPlan {
    /// `--levels`: empty for an automatic analysis.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<u32>,
    /// `--duration` of each manual level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// `--search`, as `SearchStrategy::as_str` writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<String>,
    #[serde(default)]
    pub open: bool,
    /// `--rate`: the open search's first rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_rps: Option<f64>,
    #[serde(default)]
    pub no_agents: bool,
    /// `--set KEY=VALUE`, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<String>,
}

impl CapacityPlan {
    /// The plan run.json's `plan` holds.
    pub fn from_value(plan: serde_json::Value) -> Result<CapacityPlan, String> {
        serde_json::from_value(plan)
            .map_err(|e| format!("run.json's `plan` is not one autoperf wrote ({e})"))
    }

    /// As run.json's `plan`.
    pub fn to_value(&self) -> Option<serde_json::Value> {
        serde_json::to_value(self).ok()
    }

    /// Each manual level's duration.
    pub fn duration(&self) -> Option<Duration> {
        self.duration_s.map(secs)
    }

    /// The search strategy asked for (`None`: the scenario's).
    pub fn search_strategy(&self) -> Option<SearchStrategy> {
        self.search.as_deref().and_then(SearchStrategy::parse)
    }

    /// The `--set`s, parsed again.
    pub fn overrides(&self) -> Result<Vec<Override>, String> {
        self.sets
            .iter()
            .map(|s| Override::parse(s))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("run.json's plan holds a --set autoperf cannot read: {e}"))
    }

    /// Whether `--resume` may continue this saved plan when the flags ask
    /// for `given` (whose empty fields are flags left out, which this plan
    /// fills in): an error names the flags that ask for another analysis,
    /// or the saved `--set` this version cannot read.
    pub fn check_resume(&self, given: &CapacityPlan) -> Result<(), String> {
        let mut conflicts = Vec::new();
        if !given.levels.is_empty() && given.levels != self.levels {
            conflicts.push("--levels");
        }
        match (given.duration_s, self.duration_s) {
            (Some(d), Some(saved)) if (d - saved).abs() > 1e-6 => conflicts.push("--duration"),
            (Some(_), None) => conflicts.push("--duration"),
            _ => {}
        }
        if given.search.is_some() && given.search_strategy() != self.search_strategy() {
            conflicts.push("--search");
        }
        if given.open && !self.open {
            conflicts.push("--open");
        }
        if given
            .rate_rps
            .is_some_and(|r| self.rate_rps.is_none_or(|s| (r - s).abs() > 1e-9))
        {
            conflicts.push("--rate");
        }
        if given.no_agents && !self.no_agents {
            conflicts.push("--no-agents");
        }
        if !given.sets.is_empty() && given.sets != self.sets {
            conflicts.push("--set");
        }
        self.overrides()?;
        if conflicts.is_empty() {
            return Ok(());
        }
        Err(format!(
            "the analysis there was started with {}; {} asks for another one. Leave the flags out to continue it as started, or drop --resume to start a new analysis in a new directory",
            self.flags(),
            conflicts.join(", ")
        ))
    }

    /// The flags that start this plan, as a user would type them.
    fn flags(&self) -> String {
        let mut f = Vec::new();
        if !self.levels.is_empty() {
            let levels: Vec<String> = self.levels.iter().map(u32::to_string).collect();
            f.push(format!("--levels {}", levels.join(",")));
        }
        if let Some(d) = self.duration_s {
            f.push(format!(
                "--duration {}",
                humantime::format_duration(secs(d))
            ));
        }
        if let Some(s) = &self.search {
            f.push(format!("--search {s}"));
        }
        if self.open {
            f.push("--open".into());
        }
        if let Some(r) = self.rate_rps {
            f.push(format!("--rate {r}/s"));
        }
        if self.no_agents {
            f.push("--no-agents".into());
        }
        for set in &self.sets {
            f.push(format!("--set '{set}'"));
        }
        match f.is_empty() {
            true => "no flags (an automatic analysis)".into(),
            false => f.join(" "),
        }
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manual() -> CapacityPlan {
        CapacityPlan {
            levels: vec![2, 4, 6],
            duration_s: Some(5.0),
            ..CapacityPlan::default()
        }
    }

    #[test]
    fn a_plan_keeps_run_json_keys_in_order() {
        let plan = CapacityPlan {
            search: Some("bisection".into()),
            sets: vec!["think_time=0s".into()],
            ..manual()
        };
        // As a JSON value, its keys sorted (run.json's `plan` always was).
        let text = serde_json::to_string(&plan.to_value().unwrap()).unwrap();
        assert_eq!(
            text,
            r#"{"duration_s":5.0,"levels":[2,4,6],"no_agents":false,"open":false,"search":"bisection","sets":["think_time=0s"]}"#
        );
        let back = CapacityPlan::from_value(serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(back, plan);
        let err = CapacityPlan::from_value(serde_json::json!({"levels": "2"})).unwrap_err();
        assert!(err.starts_with("run.json's `plan` is not one"), "{err}");
    }

    #[test]
    fn resuming_takes_the_same_flags_or_none_and_refuses_others() {
        let saved = manual();
        saved.check_resume(&CapacityPlan::default()).unwrap();
        saved.check_resume(&manual()).unwrap();
        let other = CapacityPlan {
            levels: vec![3, 4],
            open: true,
            ..manual()
        };
        let err = saved.check_resume(&other).unwrap_err();
        assert!(
            err.starts_with("the analysis there was started with --levels 2,4,6 --duration 5s; --levels, --open asks"),
            "{err}"
        );
        let auto = CapacityPlan::default();
        let err = auto.check_resume(&manual()).unwrap_err();
        assert!(err.contains("no flags (an automatic analysis)"), "{err}");
        let unreadable = CapacityPlan {
            sets: vec!["no equals sign".into()],
            ..CapacityPlan::default()
        };
        let err = unreadable.check_resume(&manual()).unwrap_err();
        assert!(err.starts_with("run.json's plan holds a --set"), "{err}");
    }
}
