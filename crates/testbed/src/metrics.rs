//! `GET /metrics` on both tiers: the standard process metrics of
//! Prometheus's client libraries, so a real Prometheus can scrape the
//! testbed as it scrapes any service: CPU seconds (from `getrusage`, to
//! the microsecond) and the resident set.

use hyper::{Response, StatusCode};

use crate::http::{respond, Body};

pub fn process_metrics() -> Response<Body> {
    let cpu_s = cpu_seconds();
    let rss = resident_bytes();
    let text = format!(
        "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n\
         # TYPE process_cpu_seconds_total counter\n\
         process_cpu_seconds_total {cpu_s}\n\
         # HELP process_resident_memory_bytes Resident memory size in bytes.\n\
         # TYPE process_resident_memory_bytes gauge\n\
         process_resident_memory_bytes {rss}\n"
    );
    respond(
        StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        text,
    )
}

/// User and system CPU of every thread of this process.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given, nothing else.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Resident pages (`/proc/self/statm`'s second field) in bytes.
fn resident_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf reads a constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(0) as u64
}
