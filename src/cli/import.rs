//! `autoperf import`: a scenario from real traffic, an access log or a HAR
//! recording.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::parse_duration;

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
