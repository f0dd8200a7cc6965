//! The processes that serve until stopped: the testbed and its tiers, the
//! profiler agent and the load generator worker.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

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
    /// Memory the web tier holds for each open connection (a closed user
    /// keeps one), e.g. `1MiB`: a known memory per user to profile.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "0")]
    pub session_memory: u64,
    /// Also run a stream processor (tb-con): a Kafka consumer group that
    /// reads this topic, pays --record-cost of CPU per record and commits
    /// every second, for lag SLOs and a known demand per record.
    #[arg(long, value_name = "TOPIC")]
    pub consume: Option<String>,
    /// The broker tb-con reads from (plaintext).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9092")]
    pub kafka: String,
    /// tb-con's consumer group.
    #[arg(long, value_name = "GROUP", default_value = "tb-con")]
    pub consumer_group: String,
    /// tb-con's threads, each reading its share of the partitions.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub consumer_workers: usize,
    /// CPU tb-con spends on each record, e.g. `2ms`.
    #[arg(long, value_name = "DURATION", value_parser = super::parse_duration, default_value = "1ms")]
    pub record_cost: std::time::Duration,
}

/// `1MiB`, `512KB`, `1048576`.
fn parse_size(text: &str) -> Result<u64, String> {
    text.parse::<bytesize::ByteSize>()
        .map(|b| b.as_u64())
        .map_err(|e| format!("expected a size like `1MiB`: {e}"))
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
    /// Where the host's cgroup file systems are, when not where this
    /// process's mounts say (in a container: the host's /sys/fs/cgroup
    /// mounted at, say, /host/sys/fs/cgroup).
    #[arg(long, value_name = "DIR")]
    pub cgroup_root: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TierArgs {
    /// web, db or consumer
    pub tier: String,
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Address of the db tier (web only).
    #[arg(long)]
    pub db: Option<SocketAddr>,
    /// Appended to the process name (tb-web-TAG).
    #[arg(long)]
    pub name_tag: Option<String>,
    /// Bytes held for each open connection (web only).
    #[arg(long, default_value_t = 0)]
    pub session_memory: usize,
    /// The consumer tier's broker, topic, group and CPU per record.
    #[arg(long)]
    pub kafka: Option<String>,
    #[arg(long)]
    pub topic: Option<String>,
    #[arg(long)]
    pub group: Option<String>,
    #[arg(long)]
    pub record_cost_us: Option<u64>,
}
