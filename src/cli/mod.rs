//! The command line: argv → typed values. Nothing here measures anything.
//!
//! One file per command family, each holding its flags and the parsers
//! only it uses; what several commands share stays here.
//!
//! - `mod.rs`: `Cli`, the `Command` list (`report`, `check` and `generator`
//!   inline; `demo` takes only the outputs), the shared groups (`--set`,
//!   generators and workers, outputs and metrics pushes) and the parsers of
//!   durations and rates.
//! - `run`: `autoperf run`, one level.
//! - `capacity`: `autoperf capacity`, the closed and open searches and `--vary`.
//! - `profile`: `autoperf profile`, demands per request type.
//! - `predict`: `autoperf predict` and its user counts and `name=value` lists.
//! - `compare`: `autoperf compare` and `--baseline`, the regression gate.
//! - `import`: `autoperf import`, a scenario from an access log or a HAR.
//! - `serve`: the long-running processes: `testbed`, `tier`, `agent`, `worker`.

mod capacity;
mod compare;
mod import;
mod predict;
mod profile;
mod run;
mod serve;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use autoperf_core::scenario::Override;
use clap::{Args, Parser, Subcommand};

pub use capacity::CapacityArgs;
pub use compare::{BaselineArgs, CompareArgs};
pub use import::ImportArgs;
pub use predict::PredictArgs;
pub use profile::ProfileArgs;
pub use run::{ArrivalSpacing, RunArgs};
pub use serve::{AgentArgs, TestbedArgs, TierArgs, WorkerArgs};

#[derive(Debug, Parser)]
#[command(
    name = "autoperf",
    version,
    about = "Automated load testing and resource-usage profiling of multi-tier web applications",
    long_about = None,
    after_help = "Start with `autoperf demo`: it runs everything against the built-in testbed."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one load test at one load level.
    #[command(
        after_help = "Example:\n  autoperf run shop.yaml --users 50 --duration 60s --warmup 10s"
    )]
    Run(RunArgs),
    /// Render report.html (and levels.csv) again from a results directory.
    #[command(after_help = "Example:\n  autoperf report autoperf-results/shop-20261123T101500Z")]
    Report {
        /// A results directory (holding run.json).
        results: PathBuf,
    },
    /// Did it get slower? Compares two results directories (run, capacity
    /// or profile) level by level and request by request; exits 1 when a
    /// figure is worse beyond its limit and significantly so.
    #[command(
        after_help = "Examples:\n  autoperf compare autoperf-results/shop-v1 autoperf-results/shop-v2\n  autoperf compare base/ new/ --max-regression p99=10%,throughput=5% --out compare-v2\n\nMetrics: throughput, mean, p50, p90, p95, p99 (relative limits) and errors\n(percentage points of the error share). Default: throughput=5%, mean=10%,\np50=10%, p90=10%, p99=10%, errors=1%."
    )]
    Compare(CompareArgs),
    /// A scenario from real traffic: an access log (nginx/Apache combined
    /// or common, JSON lines; gzip too) becomes a CBMG with its request
    /// classes, transition probabilities, think time, data files and
    /// arrivals; a HAR recording becomes its one journey, values correlated.
    #[command(
        after_help = "Examples:\n  autoperf import access.log --target http://127.0.0.1:8080 --out shop.yaml\n  autoperf import access.log.gz --session-timeout 15m --min-share 1%\n  autoperf import access.log --log-format '$remote_addr - - [$time_local] \"$request\" $status $bytes_sent \"$cookie_sid\"'\n  autoperf import app.jsonl --format json --json-fields time=ts,client=ip,session=user_id\n  autoperf import journey.har --target http://127.0.0.1:8080\n\nWrites the scenario, its data directory (NAME.data/), NAME.import.html (the graph\ndrawn, the classes, the fit, what was skipped) and NAME.import.json."
    )]
    Import(ImportArgs),
    /// Validate a scenario file and explain every problem.
    #[command(
        after_help = "Examples:\n  autoperf check shop.yaml\n  autoperf check shop.yaml --set think_time=200ms"
    )]
    Check {
        /// The scenario file (YAML).
        scenario: PathBuf,
        #[command(flatten)]
        set: SetArgs,
    },
    /// Automatic capacity analysis: finds the throughput and response-time
    /// curve up to saturation (users); on a scenario with `arrivals:` (or
    /// --open), the highest arrival rate that meets the SLOs.
    #[command(
        after_help = "Examples:\n  autoperf capacity shop.yaml\n  autoperf capacity shop.yaml --levels 10,50,100 --duration 60s\n  autoperf capacity shop.yaml --resume autoperf-results/shop-20261123T101500Z\n  autoperf capacity api.yaml --open --rate 50/s\n  autoperf capacity api.yaml --vary web_workers=1,2 --apply 'scripts/testbed-restart.sh {web_workers}' --ready http://127.0.0.1:8080/health"
    )]
    Capacity(CapacityArgs),
    /// Measure what one request of each type costs every server process.
    #[command(
        after_help = "Example:\n  autoperf profile shop.yaml --requests login,search --users 8"
    )]
    Profile(ProfileArgs),
    /// Predict throughput, response time and utilisation for loads, mixes
    /// and platforms not tested, by a queueing model of measured demands.
    #[command(
        after_help = "Examples:\n  autoperf predict autoperf-results/shop-profile --users 1..2000\n  autoperf predict autoperf-results/shop-profile --mix login=0.2,search=0.8 --cores web=4\n  autoperf predict autoperf-results/shop-capacity --speedup db=1.5 --rate 100/s,200/s"
    )]
    Predict(PredictArgs),
    /// Start the built-in testbed and run the bundled scenario against it.
    #[command(after_help = "Example:\n  autoperf demo --out demo-results")]
    Demo(DemoArgs),
    /// Run the built-in two-tier system under test (tb-web, tb-db).
    #[command(after_help = "Example:\n  autoperf testbed --listen 127.0.0.1:8080 --web-workers 1")]
    Testbed(TestbedArgs),
    /// Run the profiler agent that reports /proc counters of server processes.
    #[command(after_help = "Example:\n  autoperf agent --listen 127.0.0.1:9870")]
    Agent(AgentArgs),
    /// A load generator worker for other hosts' runs: takes one level at a
    /// time from a controller (`run`, `capacity` or `profile` with
    /// --workers), generates its share and streams the measurements back.
    #[command(
        after_help = "Examples:\n  autoperf worker --listen 127.0.0.1:7420\n  autoperf worker --listen 0.0.0.0:7420 --token-file /etc/autoperf/token\n\nThen, on the controller:\n  autoperf capacity shop.yaml --workers 10.0.0.11:7420,10.0.0.12:7420 --worker-token-file token\n  autoperf run shop.yaml --users 60000 --workers dns:autoperf-workers:7420 --min-workers 3"
    )]
    Worker(WorkerArgs),
    /// One tier of the testbed (started by `autoperf testbed`).
    #[command(hide = true)]
    Tier(TierArgs),
    /// A generator process (started by `run` and `capacity` when a level
    /// needs more connections than one process may hold): reads its job on
    /// stdin, writes snapshots on stdout.
    #[command(hide = true)]
    Generator,
}

/// `--set`: scenario values from the command line.
#[derive(Debug, Args)]
pub struct SetArgs {
    /// Override a scenario value: KEY is a path of keys joined by dots
    /// (think_time, target.base_url, requests.login.path), VALUE is YAML
    /// (200ms, or {exponential: 200ms}); repeatable, applied in order.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_override)]
    pub overrides: Vec<Override>,
}

/// Where the load comes from: how many generator processes, which source
/// addresses.
#[derive(Debug, Args)]
pub struct GeneratorArgs {
    /// Generator processes to spread each level over, at least (more start
    /// by themselves when a level needs more connections than one process
    /// may hold under its open-file limit).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub generators: Option<u32>,
    /// Local addresses to connect from, comma-separated, dealt round-robin
    /// (default: any; 127.0.0.1, .2, … by themselves when a loopback
    /// target needs more ephemeral ports than one address has).
    #[arg(long, value_delimiter = ',', value_name = "ADDRS")]
    pub local_addresses: Vec<std::net::IpAddr>,
    /// Wake-up coalescing: a generator thread awaiting two replies or more
    /// naps this long before it waits on its sockets, so replies arriving
    /// meanwhile cost one wake-up (of it and of the server's core) instead
    /// of one each. A reply may be read up to this late; 0 turns it off
    /// [default: 20us].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub coalesce: Option<Duration>,
    /// Run the levels on `autoperf worker`s instead of this host,
    /// comma-separated: host:port, or dns:NAME:PORT for every address a
    /// name resolves to (a Kubernetes headless Service's ready pods).
    #[arg(long, value_delimiter = ',', value_name = "WORKERS")]
    pub workers: Vec<String>,
    /// File whose first line is the workers' token (their --token-file).
    /// With --workers or the scenario's `workers:`.
    #[arg(long, value_name = "FILE")]
    pub worker_token_file: Option<PathBuf>,
    /// Speak TLS to the workers, trusting the CA certificate(s) of this PEM
    /// file for their --tls-cert (each is checked against the name
    /// --workers gives it).
    #[arg(long, value_name = "FILE")]
    pub worker_ca_file: Option<PathBuf>,
    /// Workers that must answer before the first level, waiting up to 2
    /// minutes [default: every host:port listed, or 1 behind dns:].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub min_workers: Option<u32>,
    /// Workers a capacity analysis starts on; it adds more when a level
    /// shows the generator as the bottleneck [default: 1; `run` and
    /// `profile` use them all].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub start_workers: Option<u32>,
}

#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Results directory (default: autoperf-results/<scenario>-<timestamp>).
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    /// Print only the final summary.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Print run.json to stdout instead of the summary (for scripts).
    #[arg(long)]
    pub json: bool,
    /// Serve Prometheus metrics at http://ADDR/metrics during the run.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Push the same metrics to a Prometheus remote-write endpoint during
    /// the run, e.g. http://127.0.0.1:9090/api/v1/write (repeatable).
    #[arg(long, value_name = "URL")]
    pub push_remote_write: Vec<String>,
    /// Push them to an OpenTelemetry collector's OTLP/HTTP endpoint, e.g.
    /// http://127.0.0.1:4318 (path /v1/metrics by default; repeatable).
    #[arg(long, value_name = "URL")]
    pub push_otlp: Vec<String>,
    /// A header every push sends, e.g. 'Authorization: Bearer TOKEN'
    /// (repeatable).
    #[arg(long, value_name = "NAME: VALUE")]
    pub push_header: Vec<String>,
    /// How often to push (at least 100ms).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_push_interval)]
    pub push_interval: Duration,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    #[command(flatten)]
    pub output: OutputArgs,
}

fn parse_push_interval(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d < Duration::from_millis(100) {
        return Err(format!("`{text}`: expected at least 100ms between pushes"));
    }
    Ok(d)
}

fn parse_override(text: &str) -> Result<Override, String> {
    Override::parse(text)
}

fn parse_rate(text: &str) -> Result<f64, String> {
    autoperf_core::scenario::parse_per_second(text)
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    autoperf_core::scenario::parse_duration(text)
}
