//! autoperf's profiler agent: it runs on each server host, reads `/proc`,
//! and serves cumulative counters as JSON over HTTP. It executes nothing
//! and answers only about the process names and cgroups it is asked about.
//!
//! Layout and data flow:
//!
//! ```text
//!   options   argv values → listen address + token (off loopback: required)
//!             + the names command lines may be matched against
//!   server    HTTP → auth → /v1/counters?process=…  /v1/health
//!                              │
//!   api       query parsing ───┘          response types (shared with the controller)
//!   scan      /proc/PID/{stat,io,cmdline} ─→ ProcSample per matching process
//!             /proc/{stat,net/dev,diskstats} → HostCounters
//!   cgroups   a glob over the cgroup hierarchies ─→ ProcSample per cgroup
//!   procfs    the pure parsers behind scan, tested on captured fixtures
//!   groups    per-group totals = live processes + departed ones (never decrease)
//! ```
//!
//! The controller (section 2.1.1 of the AutoPerf paper) divides the change
//! in a group's cumulative CPU time by the requests completed meanwhile;
//! unlike `ps`, /proc gives clock-tick (10 ms) resolution, and the departed
//! accounting keeps a pre-fork server's churning workers from making the
//! total jump backwards.

pub mod admission;
pub mod api;
pub mod cgroups;
pub mod groups;
pub mod options;
pub mod procfs;
pub mod scan;
pub mod server;

use std::future::Future;

use anyhow::Context as _;

pub use api::{
    AgentInfo, Counters, CpuTimes, DiskCounters, GroupCounters, Health, HostCounters, NetCounters,
};
pub use options::{is_loopback, resolve_token, Access, AgentOptions, OptionsError, DEFAULT_LISTEN};
pub use server::serve;

/// Runs the agent until SIGINT or SIGTERM: checks the options, binds, prints
/// the address it listens on and serves on a single-threaded runtime (the
/// agent must barely disturb the host it measures).
pub fn agent_main(options: AgentOptions) -> anyhow::Result<()> {
    let access = Access::from_options(&options)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the agent's runtime")?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .with_context(|| format!("cannot listen on {}", options.listen))?;
        let addr = listener.local_addr()?;
        println!("autoperf agent listening on http://{addr}");
        serve(listener, access, shutdown_signal()).await
    })
}

/// An agent serving on loopback from a thread of the calling process, for
/// `autoperf demo` and tests. Dropping it stops it.
pub struct BackgroundAgent {
    pub addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl BackgroundAgent {
    /// Binds `listen` (use port 0 for any free port; loopback only, as it
    /// takes no token) and serves until dropped.
    pub fn start(listen: std::net::SocketAddr) -> anyhow::Result<BackgroundAgent> {
        anyhow::ensure!(
            is_loopback(&listen),
            "a background agent serves loopback only, not {listen}"
        );
        let std_listener = std::net::TcpListener::bind(listen)
            .with_context(|| format!("cannot listen on {listen}"))?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the agent's runtime")?;
        let thread = std::thread::Builder::new()
            .name("autoperf-agent".into())
            .spawn(move || {
                runtime.block_on(async move {
                    if let Ok(listener) = tokio::net::TcpListener::from_std(std_listener) {
                        let _ = serve(listener, Access::default(), async {
                            let _ = stopped.await;
                        })
                        .await;
                    }
                });
            })?;
        Ok(BackgroundAgent {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for BackgroundAgent {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Completes on the first SIGINT or SIGTERM.
fn shutdown_signal() -> impl Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let interrupt = signal(SignalKind::interrupt());
    let terminate = signal(SignalKind::terminate());
    async move {
        match (interrupt, terminate) {
            (Ok(mut i), Ok(mut t)) => {
                tokio::select! {
                    _ = i.recv() => {}
                    _ = t.recv() => {}
                }
            }
            // Without signal handlers the default action still stops us.
            _ => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_main_refuses_off_loopback_without_a_token_before_binding() {
        let options = AgentOptions {
            listen: "0.0.0.0:0".parse().unwrap(),
            ..AgentOptions::default()
        };
        let err = agent_main(options).unwrap_err();
        assert!(matches!(
            err.downcast_ref::<OptionsError>(),
            Some(OptionsError::TokenRequired { .. })
        ));
    }
}
