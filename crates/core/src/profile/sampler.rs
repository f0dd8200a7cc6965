//! Samples every agent once a second on a thread of its own, so a slow or
//! dead agent never delays the load. Readings are kept in order; a level
//! takes the ones inside its measured window.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::agents::{AgentSet, Counters};
use crate::protocol::http1;

/// One round of asking every agent.
#[derive(Debug, Clone)]
pub struct Reading {
    pub at: Instant,
    /// Indexed like `AgentSet::agents`; `None` where the agent did not answer.
    pub counters: Vec<Option<Counters>>,
}

#[derive(Default)]
struct Shared {
    readings: Vec<Reading>,
    warnings: Vec<String>,
}

pub struct Sampler {
    shared: Arc<Mutex<Shared>>,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    pub(crate) fn start(agents: AgentSet, period: Duration) -> Sampler {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (stop, stopped) = watch::channel(false);
        let inner = shared.clone();
        let thread = std::thread::Builder::new()
            .name("autoperf-sampler".into())
            .spawn(move || sample_loop(agents, period, inner, stopped))
            .ok();
        Sampler {
            shared,
            stop,
            thread,
        }
    }

    /// Readings taken in `[from, to]`, in order.
    pub(crate) fn readings_between(&self, from: Instant, to: Instant) -> Vec<Reading> {
        let shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        shared
            .readings
            .iter()
            .filter(|r| r.at >= from && r.at <= to)
            .cloned()
            .collect()
    }

    /// Forgets readings older than `before` (a finished level's).
    pub(crate) fn prune_before(&self, before: Instant) {
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        shared.readings.retain(|r| r.at >= before);
    }

    /// Warnings raised since the last call (an agent stopped answering…).
    pub(crate) fn take_warnings(&self) -> Vec<String> {
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut shared.warnings)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn sample_loop(
    agents: AgentSet,
    period: Duration,
    shared: Arc<Mutex<Shared>>,
    mut stopped: watch::Receiver<bool>,
) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
        s.warnings
            .push("cannot start the agent sampler: no server figures this run".into());
        return;
    };
    runtime.block_on(async {
        let mut conns: Vec<Option<http1::Connection>> = agents.agents.iter().map(|_| None).collect();
        let mut answering: Vec<bool> = vec![true; agents.agents.len()];
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stopped.wait_for(|s| *s) => break,
                _ = ticker.tick() => {}
            }
            let at = Instant::now();
            let mut counters = Vec::with_capacity(agents.agents.len());
            // Agents are asked one after the other: there are few, and each
            // answer takes well under a millisecond on a live agent.
            for (i, agent) in agents.agents.iter().enumerate() {
                let result = agent.fetch(&mut conns[i]).await;
                let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
                match &result {
                    Err(reason) if answering[i] => {
                        answering[i] = false;
                        s.warnings.push(format!(
                            "{} (tier {}) stopped answering: {reason}; the run goes on without its figures",
                            agent.describe(),
                            agent.tiers.join(", ")
                        ));
                    }
                    Ok(_) if !answering[i] => {
                        answering[i] = true;
                        s.warnings.push(format!(
                            "{} (tier {}) answers again",
                            agent.describe(),
                            agent.tiers.join(", ")
                        ));
                    }
                    _ => {}
                }
                counters.push(result.ok());
            }
            let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
            s.readings.push(Reading { at, counters });
        }
    });
}
