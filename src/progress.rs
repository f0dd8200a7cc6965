//! The live view on a terminal: one progress line per level (level, users,
//! req/s, p99, errors, the level's precision so far, each watched
//! consumer group's lag, elapsed and estimated remaining). Off a terminal, or
//! with `--quiet`, it stays silent; warnings still go to stderr unless quiet.

use std::io::IsTerminal;
use std::time::Duration;

use autoperf_core::engine::Level;
use autoperf_core::measure::printable;
use autoperf_core::measure::{Batches, LevelInfo, Tick, TickSink};
use autoperf_core::profile::latest_lag::LatestLag;
use autoperf_core::record::{LevelRecord, SloVerdict};
use autoperf_core::report::prometheus::SharedMetrics;
use autoperf_core::run::RunObserver;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct LiveView {
    bar: Option<ProgressBar>,
    /// The Prometheus registry, fed the same ticks.
    metrics: Option<SharedMetrics>,
    levels: usize,
    quiet: bool,
    /// Print one line per finished level (the demo's running table).
    echo_levels: bool,
    /// The running level's load: "50 users", "200.0 arrivals/s".
    load: String,
    /// The consumer groups' latest lag, when lag thresholds are watched.
    lag: Option<LatestLag>,
    /// The running level's measured window, for its precision so far.
    batches: Batches,
    /// The scenario's mean think time (s): a level of few users is as
    /// precise as its cycle (`Batches::precision`).
    think_s: f64,
}

impl LiveView {
    pub fn new(levels: usize, quiet: bool) -> LiveView {
        LiveView {
            bar: None,
            load: String::new(),
            metrics: None,
            levels,
            quiet,
            echo_levels: false,
            lag: None,
            batches: Batches::default(),
            think_s: 0.0,
        }
    }

    pub fn think_time(mut self, think_s: f64) -> LiveView {
        self.think_s = think_s;
        self
    }

    pub fn metrics(mut self, metrics: SharedMetrics) -> LiveView {
        self.metrics = Some(metrics);
        self
    }

    pub fn echo_levels(mut self) -> LiveView {
        self.echo_levels = true;
        self
    }

    /// "3/5" when the number of levels is known, "3" when a search decides.
    fn of(&self, index: u32) -> String {
        if self.levels > 0 {
            format!("{index}/{}", self.levels)
        } else {
            index.to_string()
        }
    }

    fn interactive(&self) -> bool {
        !self.quiet && std::io::stderr().is_terminal()
    }
}

impl TickSink for LiveView {
    fn on_tick(&mut self, level: &LevelInfo, tick: &Tick) {
        if let Some(m) = &mut self.metrics {
            m.on_tick(level, tick);
        }
        let Some(bar) = &self.bar else { return };
        if !tick.warmup {
            self.batches
                .add(tick.length.as_secs_f64(), tick.active_users, &tick.stats);
        }
        // What a capacity level waits for; else (an open level's batch
        // means) the throughput's.
        let precision = self
            .batches
            .precision(self.think_s)
            .or_else(|| self.batches.throughput_precision())
            .map_or(String::new(), |p| format!(" · ±{:.1}%", p * 100.0));
        let total = tick.stats.total();
        let secs = tick.length.as_secs_f64().max(1e-3);
        let elapsed = Duration::from_secs(tick.seq + 1);
        bar.set_position(elapsed.as_secs().min(bar.length().unwrap_or(u64::MAX)));
        bar.set_message(format!(
            "level {} · {} · {:.1} req/s · p99 {:.1} ms · errors {}{}{}{}",
            self.of(level.index),
            self.load,
            total.requests as f64 / secs,
            total.quantile_ms(0.99),
            total.errors.total(),
            precision,
            self.lag
                .as_ref()
                .map_or(String::new(), |lag| format!(" · {}", lag.text())),
            if tick.warmup { " · warm-up" } else { "" }
        ));
    }
}

impl RunObserver for LiveView {
    fn watching_lag(&mut self, latest: LatestLag) {
        self.lag = Some(latest);
    }

    fn level_started(&mut self, level: &Level) {
        if !self.interactive() {
            return;
        }
        self.load = load_label(level);
        self.batches = Batches::default();
        let total = (level.warmup() + level.duration()).as_secs().max(1);
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{msg}  [{elapsed_precise} / ~{duration_precise}] {bar:20}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_message(format!(
            "level {} · {} · starting",
            self.of(level.index()),
            self.load
        ));
        bar.enable_steady_tick(Duration::from_millis(200));
        self.bar = Some(bar);
    }

    fn level_finished(&mut self, level: &LevelRecord) {
        if let Some(m) = &self.metrics {
            let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
            for (tier, usage) in &level.servers {
                for (process, cores) in &usage.cpu_util_cores_per_process {
                    m.set_server_cpu_cores(tier, process, *cores);
                }
            }
        }
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        if self.echo_levels && !self.quiet {
            let load = match (level.users, level.rate_rps) {
                (Some(users), _) => format!("{users} users"),
                (None, Some(rate)) => format!("{rate:.1} arrivals/s"),
                (None, None) => String::new(),
            };
            eprintln!(
                "level {}: {load}, {:.1} req/s, mean {:.2} ms, p99 {:.2} ms, errors {}{}",
                self.of(level.level),
                level.throughput_rps,
                level.response_time_ms.mean,
                level.response_time_ms.p99,
                level.errors,
                match &level.capacity {
                    Some(c) => {
                        let u = c.bottleneck_utilisation.map_or(String::new(), |u| {
                            format!(", bottleneck busy {:.0}%", u * 100.0)
                        });
                        let n = c.n_star.map_or(String::new(), |n| format!(", N* ≈ {n:.0}"));
                        let steady = match c.steady_after_s {
                            Some(s) => format!(", steady after {s:.0}s"),
                            None => ", never steady".to_string(),
                        };
                        format!("{u}{n}{steady}")
                    }
                    None => String::new(),
                } + &rate_verdict(level)
            );
        }
    }

    fn note(&mut self, message: &str) {
        if self.quiet {
            return;
        }
        let message = printable(message);
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{message}")),
            None => eprintln!("{message}"),
        }
    }

    fn warning(&mut self, message: &str) {
        if self.quiet {
            return;
        }
        let message = printable(message);
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("warning: {message}")),
            None => eprintln!("warning: {message}"),
        }
    }

    fn alarm(&mut self, message: &str) {
        let message = printable(message);
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("WARNING: {message}")),
            None => eprintln!("WARNING: {message}"),
        }
    }
}

/// The load of a level as the live line names it: users, or arrivals/s.
fn load_label(level: &Level) -> String {
    match level {
        Level::Closed(plan) => format!("{} users", plan.users),
        Level::Open(plan) => format!("{:.1} arrivals/s", plan.target_rate()),
    }
}

/// The open search's verdict on a finished level, for its line:
/// `, delivered 249.8/s: FAIL p99 < 100ms failed: …`.
fn rate_verdict(level: &LevelRecord) -> String {
    let Some(j) = &level.rate_search else {
        return String::new();
    };
    let why = match j.why() {
        why if why.is_empty() => why,
        why => format!(" — {why}"),
    };
    let verdict = match j.verdict {
        SloVerdict::Pass => "pass".to_string(),
        SloVerdict::Fail => "FAIL".to_string(),
        other => other.as_str().replace('_', " "),
    };
    format!(", delivered {:.1}/s: {verdict}{why}", j.delivered_rps)
}
