//! The command line: argv → typed values. Nothing here measures anything.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use autoperf_core::compare::Limits;
use autoperf_core::scenario::{Override, SearchStrategy};
use clap::{Args, Parser, Subcommand};

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

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The scenario file (YAML).
    pub scenario: PathBuf,
    #[command(flatten)]
    pub set: SetArgs,
    /// Number of concurrent virtual users (closed workload). Without it and
    /// without --rate, the scenario's `arrivals:` run.
    #[arg(long, short = 'u', conflicts_with = "rate")]
    pub users: Option<u32>,
    /// Arrival rate of an open workload, e.g. 500/s: each arrival starts a session.
    #[arg(long, value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// How open-workload arrivals are spaced (default: poisson, or the scenario's).
    #[arg(long, value_enum)]
    pub arrivals: Option<ArrivalSpacing>,
    /// Open workload: sessions in flight at most; later arrivals wait, and are
    /// counted (default 10000, or the scenario's).
    #[arg(long)]
    pub max_in_flight: Option<u32>,
    /// Measured duration after the warm-up, e.g. 30s, 2m (default 30s, or
    /// what the scenario's arrival stages last).
    #[arg(long, short = 'd', value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Warm-up excluded from every figure (default: twice the think time, 3–30 s).
    #[arg(long, value_parser = parse_duration)]
    pub warmup: Option<Duration>,
    /// Run without the profiler agents named under `servers:`.
    #[arg(long)]
    pub no_agents: bool,
    #[command(flatten)]
    pub generators: GeneratorArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub baseline: BaselineArgs,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The earlier results directory (the baseline).
    pub base: PathBuf,
    /// The results directory to judge against it.
    pub new: PathBuf,
    /// How much worse each figure may get, e.g. p99=10%,throughput=5%
    /// (metrics not named are not gated) [default: throughput=5%,
    /// mean=10%, p50=10%, p90=10%, p99=10%, errors=1%].
    #[arg(long, value_name = "LIMITS", value_parser = parse_limits)]
    pub max_regression: Option<Limits>,
    /// Where compare.json and compare.html go [default: NEW].
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    /// Print compare.json to stdout instead of the table (for scripts).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// An access log (plain or .gz) or a HAR recording (.har).
    pub source: PathBuf,
    /// The log's format [default: detected from its first lines; `har`
    /// for a .har file].
    #[arg(long, value_parser = ["auto", "combined", "common", "json", "har"])]
    pub format: Option<String>,
    /// The log's format as the server was configured to write it: nginx's
    /// log_format ('$remote_addr - $remote_user [$time_local] "$request"
    /// $status … $cookie_sid') or Apache's LogFormat ('%h %l %u %t \"%r\"
    /// %>s %b \"%{sid}C\"'). A logged cookie ($cookie_NAME, %{NAME}C)
    /// groups requests into sessions.
    #[arg(long, value_name = "SPEC", conflicts_with = "format")]
    pub log_format: Option<String>,
    /// The session cookie, when the format logs the whole Cookie header
    /// ($http_cookie, %{Cookie}i).
    #[arg(long, value_name = "NAME", requires = "log_format")]
    pub session_cookie: Option<String>,
    /// The scenario's target.base_url [default: http://127.0.0.1:8080 for a
    /// log; the recorded origin for a HAR].
    #[arg(long, value_name = "BASE_URL")]
    pub target: Option<String>,
    /// The scenario file to write [default: SOURCE's name with .yaml, here].
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    /// Replace the scenario file if it exists.
    #[arg(long)]
    pub force: bool,
    /// A client silent this long starts a new session.
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = parse_duration)]
    pub session_timeout: Duration,
    /// Classes with a smaller share of the requests fold into `other`
    /// (e.g. 0.5% or 0.005).
    #[arg(long, value_name = "SHARE", default_value = "0.5%", value_parser = parse_share)]
    pub min_share: f64,
    /// JSON logs: which field holds what, ROLE=FIELD pairs (roles: time,
    /// client, agent, method, path, request, status, session). `session`
    /// groups requests by that field (a user id, a session cookie) instead
    /// of client address and user agent.
    #[arg(long, value_name = "ROLE=FIELD,…")]
    pub json_fields: Option<String>,
    /// Extensions of static assets to skip (comma-separated; empty keeps
    /// them) [default: css,js,png,jpg,gif,svg,ico,woff,… ].
    #[arg(long, value_name = "EXT,…")]
    pub static_ext: Option<String>,
    /// User agents to skip as robots (a regex; empty keeps them all)
    /// [default: bots, crawlers, spiders, uptime monitors].
    #[arg(long, value_name = "REGEX")]
    pub bots: Option<String>,
    /// Paths to skip (a regex), e.g. '^/(health|metrics)'.
    #[arg(long, value_name = "REGEX")]
    pub exclude: Option<String>,
    /// Rows of observed values kept per class for its data file.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub data_rows: u32,
    /// No progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

fn parse_share(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("expected a share like 0.5% or 0.005, found `{s}`"))?;
    if (0.0..1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("expected a share between 0 and 100%, found `{s}`"))
    }
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

/// `--baseline`: compare the run with an earlier one at its end, so one CI
/// step gates a release.
#[derive(Debug, Args)]
pub struct BaselineArgs {
    /// An earlier results directory: at the end, compare with it (as
    /// `autoperf compare`; compare.json and compare.html in the results)
    /// and exit 1 on a regression.
    #[arg(long, value_name = "DIR")]
    pub baseline: Option<PathBuf>,
    /// The limits the comparison with --baseline applies (as `autoperf
    /// compare --max-regression`).
    #[arg(long, value_name = "LIMITS", value_parser = parse_limits, requires = "baseline")]
    pub max_regression: Option<Limits>,
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
pub struct CapacityArgs {
    /// The scenario file (YAML).
    pub scenario: PathBuf,
    #[command(flatten)]
    pub set: SetArgs,
    /// Manual override: run exactly these user levels (comma-separated).
    #[arg(long, value_delimiter = ',', requires = "duration")]
    pub levels: Vec<u32>,
    /// Measured duration of each manual level.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Continue an interrupted analysis in this results directory.
    #[arg(long, conflicts_with = "out")]
    pub resume: Option<PathBuf>,
    /// How levels inside the range are chosen: `model` (a queueing model of
    /// the measured demands runs the levels where the curve bends) or
    /// `bisection` (the paper's) [default: the scenario's `capacity.search`,
    /// else model].
    #[arg(long, value_name = "STRATEGY", value_parser = parse_search, conflicts_with = "levels")]
    pub search: Option<SearchStrategy>,
    /// Search the highest arrival rate that meets the SLOs (an open
    /// workload), as on a scenario with `arrivals:`, even without them.
    #[arg(long, conflicts_with_all = ["levels", "search"])]
    pub open: bool,
    /// The open search's first rate, e.g. 50/s [default: the scenario's
    /// `arrivals:` rate, else 10/s]. Implies --open.
    #[arg(long, value_parser = parse_rate, conflicts_with_all = ["levels", "search"])]
    pub rate: Option<f64>,
    /// Open search per resource value, as Theodolite's scalability
    /// benchmark: NAME=v1,v2,… (e.g. web_workers=1,2). Needs --apply.
    #[arg(long, value_name = "NAME=VALUES", requires = "apply", conflicts_with_all = ["levels", "search", "resume"])]
    pub vary: Option<String>,
    /// The shell command that reconfigures the system under test for each
    /// --vary value, `{NAME}` replaced by it (e.g. 'scripts/restart.sh
    /// {web_workers}'); it runs before each series, and may start a server
    /// in the background.
    #[arg(long, value_name = "COMMAND", requires = "vary")]
    pub apply: Option<String>,
    /// After --apply, wait until GET URL answers 2xx [default: until the
    /// target accepts connections].
    #[arg(long, value_name = "URL", requires = "vary")]
    pub ready: Option<String>,
    /// How long to wait for readiness after --apply.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub ready_timeout: Duration,
    /// Run without the profiler agents named under `servers:`.
    #[arg(long)]
    pub no_agents: bool,
    /// Fit a queueing model of the measured demands against the measured
    /// curve (prediction.json, the report's charts). On by default when the
    /// agents measured demands; with this flag, their absence is an error.
    #[arg(long, conflicts_with_all = ["no_predict", "no_agents"])]
    pub predict: bool,
    /// No queueing model after the analysis.
    #[arg(long)]
    pub no_predict: bool,
    #[command(flatten)]
    pub generators: GeneratorArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub baseline: BaselineArgs,
}

#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// The scenario file (YAML); its `servers:` name the processes and agents.
    pub scenario: PathBuf,
    #[command(flatten)]
    pub set: SetArgs,
    /// Request types to profile, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    pub requests: Vec<String>,
    /// Concurrent users loading each request type.
    #[arg(long, short = 'u', default_value_t = 10)]
    pub users: u32,
    /// Warm-up before each request type's measurement (prerequisites run in it).
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub warmup: Duration,
    #[command(flatten)]
    pub generators: GeneratorArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct PredictArgs {
    /// A results directory of `autoperf profile` or `autoperf capacity`.
    pub results: PathBuf,
    /// Users to predict for: N, A..B or a list (default: 1 to twice N*).
    #[arg(long, value_parser = parse_users, conflicts_with = "rate")]
    pub users: Option<UserCounts>,
    /// Open-workload what-ifs instead: arrival rates, e.g. 100/s,200/s.
    #[arg(long, value_delimiter = ',', value_parser = parse_rate)]
    pub rate: Vec<f64>,
    /// Think time between a user's requests (default: the scenario's mean).
    #[arg(long, value_parser = parse_duration)]
    pub think: Option<Duration>,
    /// Request mix by share, e.g. login=0.2,search=0.8 (needs a profile).
    #[arg(long, value_delimiter = ',', value_parser = parse_pair::<f64>)]
    pub mix: Vec<(String, f64)>,
    /// Cores per tier, e.g. web=4,db=2.
    #[arg(long, value_delimiter = ',', value_parser = parse_pair::<u32>)]
    pub cores: Vec<(String, u32)>,
    /// A tier's CPU this many times faster, e.g. db=1.5.
    #[arg(long, value_delimiter = ',', value_parser = parse_pair::<f64>)]
    pub speedup: Vec<(String, f64)>,
    /// The scenario the results were measured with (default: the file
    /// named in run.json).
    #[arg(long)]
    pub scenario: Option<PathBuf>,
    /// Compare with the measured levels of this capacity analysis (default:
    /// RESULTS itself, when it is one and no what-if is asked).
    #[arg(long, value_name = "DIR")]
    pub measured: Option<PathBuf>,
    /// Where prediction.json goes (default: the results directory).
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    /// Print prediction.json to stdout instead of the table.
    #[arg(long)]
    pub json: bool,
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

#[derive(Debug, Args)]
pub struct TestbedArgs {
    /// Address of the web tier.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Workers of the web tier: event loops on threads of their own, each
    /// serving its share of the connections and burning one request at a time.
    #[arg(long, default_value_t = 2)]
    pub web_workers: usize,
    /// Workers of the db tier, like the web tier's.
    #[arg(long, default_value_t = 2)]
    pub db_workers: usize,
    /// Also serve a stub Confluent schema registry here (for Kafka scenarios).
    #[arg(long, value_name = "ADDR")]
    pub schema_registry: Option<SocketAddr>,
    /// Name the tiers tb-web-TAG and tb-db-TAG (at most 8 bytes), so that
    /// agents tell this testbed from another on the same host.
    #[arg(long, value_name = "TAG")]
    pub name_tag: Option<String>,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Address to take controllers' connections on; off loopback a token
    /// file is required.
    #[arg(long, default_value = "127.0.0.1:7420")]
    pub listen: SocketAddr,
    /// File whose first line is the secret controllers must prove they
    /// hold (at least 16 characters; it never crosses the wire).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// The name controllers report this worker by [default: the host name].
    #[arg(long)]
    pub name: Option<String>,
    /// Local addresses this worker's connections come from, comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "ADDRS")]
    pub local_addresses: Vec<std::net::IpAddr>,
    /// Speak TLS only, with this PEM certificate (chain); with --tls-key.
    /// Controllers then need --worker-ca-file.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Address to serve counters on; off loopback a token file is required.
    #[arg(long, default_value = "127.0.0.1:9870")]
    pub listen: SocketAddr,
    /// File whose first line is the bearer token clients must send.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Allow `match=cmdline` queries for exactly this name (repeatable).
    /// Off by default: command lines hold other programs' arguments.
    #[arg(long, value_name = "NAME")]
    pub allow_cmdline: Vec<String>,
}

#[derive(Debug, Args)]
pub struct TierArgs {
    /// web or db
    pub tier: String,
    #[arg(long)]
    pub listen: SocketAddr,
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Address of the db tier (web only).
    #[arg(long)]
    pub db: Option<SocketAddr>,
    /// Appended to the process name (tb-web-TAG).
    #[arg(long)]
    pub name_tag: Option<String>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ArrivalSpacing {
    /// A Poisson process: exponential gaps.
    Poisson,
    /// Evenly spaced arrivals.
    Even,
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

fn parse_limits(text: &str) -> Result<Limits, String> {
    Limits::parse(text)
}

fn parse_rate(text: &str) -> Result<f64, String> {
    autoperf_core::scenario::parse_per_second(text)
}

fn parse_search(text: &str) -> Result<SearchStrategy, String> {
    SearchStrategy::parse(text).ok_or_else(|| format!("`{text}`: expected `model` or `bisection`"))
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    autoperf_core::scenario::parse_duration(text)
}

/// User counts to predict for.
#[derive(Debug, Clone)]
pub struct UserCounts(pub Vec<u32>);

/// `N`, `A..B` (up to 200 evenly spaced counts) or `A,B,C`.
fn parse_users(text: &str) -> Result<UserCounts, String> {
    let number = |s: &str| {
        s.trim()
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("expected users like 100, 1..2000 or 10,50,100, found `{text}`"))
    };
    if let Some((a, b)) = text.split_once("..") {
        let (a, b) = (number(a)?, number(b)?);
        if a > b {
            return Err(format!(
                "`{text}`: the range runs from the smaller to the larger count"
            ));
        }
        return Ok(UserCounts(autoperf_core::model::predict::user_steps(
            a, b, 200,
        )));
    }
    text.split(',')
        .map(number)
        .collect::<Result<_, _>>()
        .map(UserCounts)
}

/// `name=value`.
fn parse_pair<T: std::str::FromStr>(text: &str) -> Result<(String, T), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("expected name=value, found `{text}`"))?;
    let value = value
        .trim()
        .parse::<T>()
        .map_err(|_| format!("`{text}`: `{value}` is not a number"))?;
    Ok((name.trim().to_string(), value))
}
