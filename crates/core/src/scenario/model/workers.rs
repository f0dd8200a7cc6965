//! `workers:`: the load generator workers on other hosts that run the
//! levels, and how their addresses are written.

use std::path::PathBuf;

/// `workers:`: load generator workers on other hosts (`autoperf worker`)
/// that run the levels instead of this one. `--workers` and its sibling
/// flags override it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSettings {
    pub addresses: Vec<WorkerSpec>,
    /// The file whose first line is the workers' token (relative paths
    /// from the scenario's directory); read by the controller only.
    pub token_file: Option<PathBuf>,
    /// PEM CA certificate(s) to check the workers' TLS certificates
    /// with; TLS to them when set. Read by the controller only.
    pub ca_file: Option<PathBuf>,
    /// Workers that must answer before the first level.
    pub min: Option<u32>,
    /// Workers a capacity analysis starts on.
    pub start: Option<u32>,
}

/// Where workers are: an address, or a DNS name whose every address is one
/// (a Kubernetes headless Service resolves to its ready pods).
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerSpec {
    /// `host:port` (a name resolves to its first address).
    Host(String),
    /// `dns:NAME:PORT`: every address NAME resolves to.
    Dns { name: String, port: u16 },
}

impl WorkerSpec {
    pub fn parse(text: &str) -> Result<WorkerSpec, String> {
        let text = text.trim();
        if let Some(rest) = text.strip_prefix("dns:") {
            let (name, port) = rest.rsplit_once(':').ok_or_else(|| {
                format!("`{text}`: expected dns:NAME:PORT, e.g. dns:autoperf-workers:7420")
            })?;
            let port = port
                .parse::<u16>()
                .map_err(|_| format!("`{text}`: `{port}` is no port number"))?;
            if name.is_empty() {
                return Err(format!("`{text}`: the DNS name is empty"));
            }
            return Ok(WorkerSpec::Dns {
                name: name.to_string(),
                port,
            });
        }
        match text.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(WorkerSpec::Host(text.to_string()))
            }
            _ => Err(format!(
                "`{text}`: expected host:port (e.g. 10.0.0.5:7420) or dns:NAME:PORT"
            )),
        }
    }
}

impl std::fmt::Display for WorkerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkerSpec::Host(text) => f.write_str(text),
            WorkerSpec::Dns { name, port } => write!(f, "dns:{name}:{port}"),
        }
    }
}
