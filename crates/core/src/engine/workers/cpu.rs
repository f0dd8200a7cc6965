//! How much CPU this host gives the worker: its cores (CPU affinity), or
//! less under a cgroup CPU quota — a container's CPU limit, 500m say —
//! which `available_parallelism` rounds up to whole cores. A level is split
//! over the workers by this figure, so a throttled worker gets its share.

use crate::measure::cgroup::CpuLimit;

/// Cores' worth of CPU this process may use (fractional under a quota).
pub(crate) fn capacity() -> f64 {
    let cores = crate::engine::split::cores() as f64;
    match CpuLimit::of_this_process() {
        Some(limit) if limit.cores > 0.0 => cores.min(limit.cores),
        _ => cores,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_some_cpu() {
        let c = capacity();
        assert!(c > 0.0 && c <= crate::engine::split::cores() as f64, "{c}");
    }
}
