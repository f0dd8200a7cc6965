//! The run record: the JSON shapes of a level object (`levels.jsonl`) and of
//! `run.json`, as docs/design.md (section 4) specifies them. Versioned data, and the only
//! input reports need, so a results directory can be re-rendered later.
//!
//! - `level`: a level object, made from a finished level's totals.
//! - `servers`: what the agents measured: per-tier usage, per-request demands.
//! - `server_side`: what else a level read of the servers: PromQL, consumer lag.
//! - `analysis`: why the run ended and what its mode concluded.
//! - `plan`: what a capacity analysis was asked for, so `--resume` goes on.
//! - `check`: whether a record read back can be what autoperf wrote.

mod analysis;
mod check;
mod classes;
mod level;
mod plan;
mod server_side;
mod servers;

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

pub use analysis::Analysis;

pub use analysis::BottleneckRecord;

pub use analysis::BusiestCpu;

pub use analysis::CapacityAnalysis;

pub use analysis::DemandPoint;

pub use analysis::HiddenBottleneckRecord;

pub use analysis::LevelChoice;

pub use analysis::ProfileAnalysis;

pub use analysis::RateAnalysis;

pub use analysis::RateChoice;

pub use analysis::RateFound;

pub use analysis::SeriesResult;

pub use analysis::StopReason;

pub use analysis::ThresholdResult;

pub use analysis::Unit;
pub use check::{unmeasurable, MAX_FIGURE};
pub use classes::ClassRecord;
#[cfg(test)]
pub(crate) use level::LittleCheck;
pub use level::{
    round3, round6, ArrivalsRecord, CapacityLevel, CheckRecord, ClientRecord, CpuQuotaRecord,
    Latency, LevelRecord,
};
pub(crate) use level::{PerRequestRecord, RateLevel};
pub use level::{SloVerdict, ThinkRecord, TimerLateness};
pub use plan::CapacityPlan;
pub(crate) use server_side::PromqlFigure;
pub use server_side::{LagFigure, LagReading};
pub(crate) use servers::{short_of_cpu, ByteRates, DiskRates, TierDemands, TierUsage};

use crate::scenario::Scenario;

/// Bumped when a key changes meaning; keys are only ever added.
pub(crate) const RECORD_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolInfo {
    pub name: String,
    pub version: String,
}

impl Default for ToolInfo {
    fn default() -> Self {
        ToolInfo {
            name: "autoperf".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScenarioInfo {
    pub name: String,
    pub file: String,
    pub text: String,
    pub target: String,
    /// `--set KEY=VALUE` applied over `text`, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<String>,
}

impl ScenarioInfo {
    pub(crate) fn of(scenario: &Scenario) -> ScenarioInfo {
        ScenarioInfo {
            name: scenario.name.clone(),
            file: scenario.source.display().to_string(),
            text: scenario.text.clone(),
            target: scenario.target.endpoint.to_string(),
            overrides: scenario.overrides.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HostInfo {
    pub hostname: String,
    pub cores: u32,
    pub os: String,
}

impl HostInfo {
    pub(crate) fn current() -> HostInfo {
        HostInfo {
            hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            os: std::env::consts::OS.into(),
        }
    }
}

/// What kind of run a record is of.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// One level (`autoperf run`).
    Run,
    /// The capacity analysis of the built-in testbed (`autoperf demo`).
    Demo,
    Capacity,
    Profile,
}

impl Mode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mode::Run => "run",
            Mode::Demo => "demo",
            Mode::Capacity => "capacity",
            Mode::Profile => "profile",
        }
    }
}

/// `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    pub record_version: u32,
    pub tool: ToolInfo,
    pub mode: Mode,
    pub scenario: ScenarioInfo,
    pub host: HostInfo,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub levels: Vec<LevelRecord>,
    pub analysis: Analysis,
    pub warnings: Vec<String>,
    /// What the run was asked for (a capacity analysis's levels, duration,
    /// search…: a `CapacityPlan`), so `--resume` continues exactly that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<serde_json::Value>,
    /// Levels the generator limited, run again on more workers (the
    /// re-run is in `levels`): kept as measured, never a curve point.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub superseded: Vec<LevelRecord>,
}

impl RunRecord {
    pub(crate) fn new(mode: Mode, scenario: &Scenario) -> RunRecord {
        RunRecord {
            record_version: RECORD_VERSION,
            tool: ToolInfo::default(),
            mode,
            scenario: ScenarioInfo::of(scenario),
            host: HostInfo::current(),
            started_at: now_rfc3339(),
            finished_at: None,
            levels: Vec::new(),
            analysis: Analysis::default(),
            warnings: Vec::new(),
            plan: None,
            superseded: Vec::new(),
        }
    }
}

pub(crate) fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}
