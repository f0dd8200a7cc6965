//! `capacity --resume DIR` continues exactly what was started there: the
//! flags as the core's `CapacityPlan` (kept in run.json's `plan`), and a
//! saved plan back as the flags it was started with.

use crate::cli::CapacityArgs;
use autoperf_core::record::CapacityPlan;

/// What `args` ask for.
pub fn plan_of(args: &CapacityArgs) -> CapacityPlan {
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

/// Completes `args` from the `saved` plan; an error names the flag that
/// asks for something else.
pub fn continue_with(saved: &CapacityPlan, args: &mut CapacityArgs) -> Result<(), String> {
    saved.check_resume(&plan_of(args))?;
    args.levels = saved.levels.clone();
    args.duration = saved.duration();
    args.search = saved.search_strategy();
    args.open = saved.open;
    args.rate = saved.rate_rps;
    args.no_agents = saved.no_agents;
    args.set.overrides = saved.overrides()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use autoperf_core::scenario::SearchStrategy;
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
        let saved = plan_of(&args("capacity s.yaml --levels 2,4,6 --duration 5s"));
        let mut resumed = args("capacity s.yaml --resume d");
        continue_with(&saved, &mut resumed).unwrap();
        assert_eq!(resumed.levels, [2, 4, 6]);
        assert_eq!(resumed.duration, Some(Duration::from_secs(5)));
        // The same flags again are fine.
        let mut same = args("capacity s.yaml --resume d --levels 2,4,6 --duration 5s");
        continue_with(&saved, &mut same).unwrap();
        let mut other = args("capacity s.yaml --resume d --levels 3,4 --duration 5s");
        let err = continue_with(&saved, &mut other).unwrap_err();
        assert!(
            err.contains("--levels 2,4,6 --duration 5s") && err.contains("--levels asks"),
            "{err}"
        );
        // An automatic analysis stays one.
        let auto = plan_of(&args("capacity s.yaml --search bisection"));
        let mut resumed = args("capacity s.yaml --resume d");
        continue_with(&auto, &mut resumed).unwrap();
        assert_eq!(resumed.search, Some(SearchStrategy::Bisection));
        let mut manual = args("capacity s.yaml --resume d --levels 1,2 --duration 2s");
        assert!(continue_with(&auto, &mut manual).is_err());
    }
}
