//! A finished level that cannot stand runs again instead of being kept:
//! on more workers when the generator was its bottleneck and the pool can
//! grow (AutoPerf's future work: a bank of load generators), or on the
//! workers left when one was lost mid-level, or once more when its
//! servers were short of CPU (a neighbour's burst passes).

use std::time::{Duration, Instant};

use super::{LevelController, RunObserver, RunPlan};
use crate::engine::{Level, StopSignal};
use crate::record::LevelRecord;

/// Why a finished level is run again instead of kept.
const MORE_WORKERS: &str = "again on more workers (the generator was the bottleneck)";
const WORKERS_LEFT: &str = "again after a worker was lost mid-level";
const SHORT_OF_CPU: &str = "again: its servers were short of CPU";

/// When the servers of a finished level were short of CPU (a process
/// queued for cores, a hypervisor's steal: `record::short_of_cpu`), the
/// level measured a busier machine than the one under test; a
/// neighbour's build or a noisy host's burst passes, so the controller
/// may want the level once more. Once per level (`tried`): on a machine
/// that stays busy the second measurement stands, flagged.
pub(super) fn remeasure_short_of_cpu(
    record: &LevelRecord,
    level: &Level,
    invalid: bool,
    tried: bool,
    controller: &mut dyn LevelController,
) -> Option<(String, Level)> {
    if tried || record.interrupted || invalid || record.incomplete.is_some() {
        return None;
    }
    let why = crate::record::short_of_cpu(&record.servers)?;
    let rerun = controller.rerun(level, SHORT_OF_CPU)?;
    Some((
        format!("the servers were short of CPU ({why}); running it again"),
        rerun,
    ))
}

/// When `level` showed the generator as the bottleneck, the pool can add
/// workers and the controller wants the level again: (workers before,
/// after, the level to run).
pub(super) fn scale_out(
    record: &LevelRecord,
    level: &Level,
    invalid: bool,
    plan: &RunPlan,
    controller: &mut dyn LevelController,
) -> Option<(usize, usize, Level)> {
    if !record.client_bottleneck || record.interrupted || invalid || record.incomplete.is_some() {
        return None;
    }
    let pool = plan.sources.workers.as_ref()?;
    if !pool.can_scale_out() {
        return None;
    }
    // The pool first: should its workers have gone meanwhile, the level
    // stands as measured; more workers for the next level do no harm.
    let (before, after) = pool.scale_out()?;
    let rerun = controller.rerun(level, MORE_WORKERS)?;
    Some((before, after, rerun))
}

/// How long a level that lost a worker waits for the pool to answer in
/// full again before it runs on the workers left: a crashed pod's
/// container restarts in seconds, an evicted one is rescheduled in tens.
const REPLACE_WAIT: Duration = Duration::from_secs(30);

/// When a worker was lost mid-level (the level is `incomplete`: it ran
/// under-loaded), the controller may want the level again on the workers
/// that answer: as many as it ran on when they come back within
/// `REPLACE_WAIT` (an idle worker of the pool, or the lost one restarted
/// under its address, a StatefulSet's pod), else those left, never fewer
/// than `--min-workers`. Once per level, so a pool whose workers keep
/// dying still ends the analysis (`invalid_level`). `None` when the
/// level stands as measured; `Some(Err(why))` when it could not run again.
pub(super) fn replace_lost(
    record: &LevelRecord,
    level: &Level,
    tried: bool,
    plan: &RunPlan,
    controller: &mut dyn LevelController,
    observer: &mut dyn RunObserver,
    stop: &StopSignal,
) -> Option<Result<Level, String>> {
    if record.incomplete.is_none() || record.interrupted || tried || !controller.reruns() {
        return None;
    }
    let pool = plan.sources.workers.as_ref()?;
    let want = record.workers.len().max(pool.min()).max(1);
    let give_up = Instant::now() + REPLACE_WAIT;
    let mut answering = pool.answering(want);
    if answering < want {
        observer.note(&format!(
            "level {}: waiting up to {} s for {want} workers to answer before running it again",
            record.level,
            REPLACE_WAIT.as_secs()
        ));
    }
    while answering < want && Instant::now() < give_up {
        if stop.wait(Duration::from_secs(1)) {
            return None;
        }
        answering = pool.answering(want);
    }
    if answering == 0 || answering < pool.min() {
        return Some(Err(format!(
            "level {}: not run again: {answering} worker{} answered within {} s, --min-workers asks for {} (start more, or lower --min-workers to go on with fewer)",
            record.level,
            if answering == 1 { "" } else { "s" },
            REPLACE_WAIT.as_secs(),
            pool.min()
        )));
    }
    controller.rerun(level, WORKERS_LEFT).map(Ok)
}
