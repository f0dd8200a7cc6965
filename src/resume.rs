//! `capacity --resume DIR` continues exactly what was started there. The
//! plan — manual levels and their duration, the search strategy, an open
//! search and its first rate, agents or not — is kept in run.json's
//! `plan`; flags left out are taken from it, and a flag asking for
//! something else is refused rather than silently starting another
//! analysis in the same directory.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cli::CapacityArgs;
use autoperf_core::scenario::{Override, SearchStrategy};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CapacityPlan {
    /// `--levels`: empty for an automatic analysis.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<String>,
    #[serde(default)]
    pub open: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_rps: Option<f64>,
    #[serde(default)]
    pub no_agents: bool,
    /// `--set KEY=VALUE`, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<String>,
}

impl CapacityPlan {
    /// What `args` ask for.
    pub fn of(args: &CapacityArgs) -> CapacityPlan {
        CapacityPlan {
            levels: args.levels.clone(),
            duration_s: args.duration.map(|d| d.as_secs_f64()),
            search: args.search.map(|s| s.as_str().to_string()),
            open: args.open,
            rate_rps: args.rate,
            no_agents: args.no_agents,
            sets: args.set.overrides.iter().map(|o| o.text.clone()).collect(),
        }
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

    /// Completes `args` from this saved plan; an error names the flag that
    /// asks for something else.
    pub fn continue_with(&self, args: &mut CapacityArgs) -> Result<(), String> {
        let mut conflicts = Vec::new();
        if !args.levels.is_empty() && args.levels != self.levels {
            conflicts.push("--levels");
        }
        args.levels = self.levels.clone();
        match (args.duration, self.duration_s) {
            (Some(d), Some(saved)) if (d.as_secs_f64() - saved).abs() > 1e-6 => {
                conflicts.push("--duration")
            }
            (Some(_), None) => conflicts.push("--duration"),
            _ => {}
        }
        args.duration = self.duration_s.map(secs);
        let saved_search = self.search.as_deref().and_then(SearchStrategy::parse);
        if args.search.is_some() && args.search != saved_search {
            conflicts.push("--search");
        }
        args.search = saved_search;
        if args.open && !self.open {
            conflicts.push("--open");
        }
        args.open = self.open;
        if args
            .rate
            .is_some_and(|r| self.rate_rps.is_none_or(|s| (r - s).abs() > 1e-9))
        {
            conflicts.push("--rate");
        }
        args.rate = self.rate_rps;
        if args.no_agents && !self.no_agents {
            conflicts.push("--no-agents");
        }
        args.no_agents = self.no_agents;
        let given: Vec<&str> = args.set.overrides.iter().map(|o| o.text.as_str()).collect();
        if !given.is_empty() && given != self.sets {
            conflicts.push("--set");
        }
        args.set.overrides = self
            .sets
            .iter()
            .map(|s| Override::parse(s))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("run.json's plan holds a --set autoperf cannot read: {e}"))?;
        if conflicts.is_empty() {
            return Ok(());
        }
        Err(format!(
            "the analysis there was started with {}; {} asks for another one. Leave the flags out to continue it as started, or drop --resume to start a new analysis in a new directory",
            self.flags(),
            conflicts.join(", ")
        ))
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn args(line: &str) -> CapacityArgs {
        let argv = std::iter::once("autoperf").chain(line.split_whitespace());
        match Cli::parse_from(argv).command {
            Command::Capacity(a) => a,
            _ => unreachable!("a capacity command line"),
        }
    }

    #[test]
    fn resume_alone_continues_the_plan_and_conflicts_are_refused() {
        let saved = CapacityPlan::of(&args("capacity s.yaml --levels 2,4,6 --duration 5s"));
        let mut resumed = args("capacity s.yaml --resume d");
        saved.continue_with(&mut resumed).unwrap();
        assert_eq!(resumed.levels, [2, 4, 6]);
        assert_eq!(resumed.duration, Some(Duration::from_secs(5)));
        // The same flags again are fine.
        let mut same = args("capacity s.yaml --resume d --levels 2,4,6 --duration 5s");
        saved.continue_with(&mut same).unwrap();
        let mut other = args("capacity s.yaml --resume d --levels 3,4 --duration 5s");
        let err = saved.continue_with(&mut other).unwrap_err();
        assert!(
            err.contains("--levels 2,4,6 --duration 5s") && err.contains("--levels asks"),
            "{err}"
        );
        // An automatic analysis stays one.
        let auto = CapacityPlan::of(&args("capacity s.yaml --search bisection"));
        let mut resumed = args("capacity s.yaml --resume d");
        auto.continue_with(&mut resumed).unwrap();
        assert_eq!(resumed.search, Some(SearchStrategy::Bisection));
        let mut manual = args("capacity s.yaml --resume d --levels 1,2 --duration 2s");
        assert!(auto.continue_with(&mut manual).is_err());
    }
}
