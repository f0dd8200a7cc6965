//! The live view on a terminal: one progress line per level (level, users,
//! req/s, p99, errors, elapsed and estimated remaining). Off a terminal, or
//! with `--quiet`, it stays silent; warnings still go to stderr unless quiet.

use std::io::IsTerminal;
use std::time::Duration;

use autoperf_core::engine::LevelPlan;
use autoperf_core::measure::{LevelInfo, Tick, TickSink};
use autoperf_core::record::LevelRecord;
use autoperf_core::runner::RunObserver;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct LiveView {
    bar: Option<ProgressBar>,
    levels: usize,
    quiet: bool,
    /// Print one line per finished level (the demo's running table).
    echo_levels: bool,
}

impl LiveView {
    pub fn new(levels: usize, quiet: bool) -> LiveView {
        LiveView {
            bar: None,
            levels,
            quiet,
            echo_levels: false,
        }
    }

    pub fn echo_levels(mut self) -> LiveView {
        self.echo_levels = true;
        self
    }

    fn interactive(&self) -> bool {
        !self.quiet && std::io::stderr().is_terminal()
    }
}

impl TickSink for LiveView {
    fn on_tick(&mut self, level: &LevelInfo, tick: &Tick) {
        let Some(bar) = &self.bar else { return };
        let total = tick.stats.total();
        let secs = tick.length.as_secs_f64().max(1e-3);
        let elapsed = Duration::from_secs(tick.seq + 1);
        bar.set_position(elapsed.as_secs().min(bar.length().unwrap_or(u64::MAX)));
        bar.set_message(format!(
            "level {}/{} · {} users · {:.1} req/s · p99 {:.1} ms · errors {}{}",
            level.index,
            self.levels,
            level.users,
            total.requests as f64 / secs,
            total.quantile_ms(0.99),
            total.errors.total(),
            if tick.warmup { " · warm-up" } else { "" }
        ));
    }
}

impl RunObserver for LiveView {
    fn level_started(&mut self, plan: &LevelPlan) {
        if !self.interactive() {
            return;
        }
        let total = (plan.warmup + plan.duration).as_secs().max(1);
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{msg}  [{elapsed_precise} / ~{duration_precise}] {bar:20}",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_message(format!(
            "level {}/{} · {} users · starting",
            plan.index, self.levels, plan.users
        ));
        bar.enable_steady_tick(Duration::from_millis(200));
        self.bar = Some(bar);
    }

    fn level_finished(&mut self, level: &LevelRecord) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        if self.echo_levels && !self.quiet {
            eprintln!(
                "level {}/{}: {} users, {:.1} req/s, mean {:.2} ms, p99 {:.2} ms, errors {}",
                level.level,
                self.levels,
                level.users.unwrap_or(0),
                level.throughput_rps,
                level.response_time_ms.mean,
                level.response_time_ms.p99,
                level.errors
            );
        }
    }

    fn warning(&mut self, message: &str) {
        if self.quiet {
            return;
        }
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("warning: {message}")),
            None => eprintln!("warning: {message}"),
        }
    }
}
