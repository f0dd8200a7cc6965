//! The agent's command-line options, and the rule that ties them together:
//! off loopback, a bearer token is required.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

/// Where the agent listens unless told otherwise.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9870);

/// The shortest token accepted.
pub const MIN_TOKEN_CHARS: usize = 16;

/// What `autoperf agent` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentOptions {
    pub listen: SocketAddr,
    /// A file whose first line is the bearer token.
    pub token_file: Option<PathBuf>,
    /// Names that may be matched against whole command lines
    /// (`match=cmdline`); none by default.
    pub allow_cmdline: Vec<String>,
    /// Where the host's cgroup file systems are, when not where
    /// /proc/self/mountinfo says (an agent in a container with the host's
    /// /sys/fs/cgroup mounted at /host/sys/fs/cgroup, say).
    pub cgroup_root: Option<PathBuf>,
}

impl Default for AgentOptions {
    fn default() -> AgentOptions {
        AgentOptions {
            listen: DEFAULT_LISTEN,
            token_file: None,
            allow_cmdline: Vec::new(),
            cgroup_root: None,
        }
    }
}

/// Who may ask the agent what.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// The bearer token every request must carry, if any.
    pub token: Option<String>,
    /// The only names `match=cmdline` may ask about. A command line holds
    /// other programs' arguments (passwords, keys); answering for any
    /// substring would let a client read them a character at a time.
    pub cmdline: Vec<String>,
    /// Where cgroup globs are matched, when not the hierarchies mounted
    /// here (`AgentOptions::cgroup_root`).
    pub cgroup_root: Option<PathBuf>,
}

impl Access {
    /// The token, and the command-line names allowed, from the options.
    pub fn from_options(options: &AgentOptions) -> Result<Access, OptionsError> {
        Ok(Access {
            token: resolve_token(options)?,
            cmdline: options.allow_cmdline.clone(),
            cgroup_root: options.cgroup_root.clone(),
        })
    }
}

/// Why the agent refuses to start.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// The listen address is reachable from other hosts and no token was given.
    #[error(
        "refusing to listen on {listen} without a token: off loopback the agent requires \
         --token-file FILE (its first line: a secret of at least {MIN_TOKEN_CHARS} characters)"
    )]
    TokenRequired { listen: SocketAddr },
    /// The token file could not be read.
    #[error("cannot read token file {}: {source}", path.display())]
    TokenFile { path: PathBuf, source: io::Error },
    /// The token is shorter than [`MIN_TOKEN_CHARS`].
    #[error(
        "token in {} is too short: its first line must have at least {MIN_TOKEN_CHARS} characters",
        path.display()
    )]
    TokenTooShort { path: PathBuf },
    /// The token has characters an HTTP header cannot carry.
    #[error(
        "token in {} must be visible ASCII characters (no spaces or control characters)",
        path.display()
    )]
    TokenNotPrintable { path: PathBuf },
}

/// Whether `addr` is reachable only from this host. An IPv4-mapped IPv6
/// loopback (`::ffff:127.0.0.1`) counts; the unspecified address does not.
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().to_canonical().is_loopback()
}

/// The token requests must carry, if any: the token file's when one is
/// given (on loopback too), and an error when the address is off loopback
/// and there is none.
pub fn resolve_token(options: &AgentOptions) -> Result<Option<String>, OptionsError> {
    match &options.token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| OptionsError::TokenFile {
                path: path.clone(),
                source,
            })?;
            token_from_text(&text, path).map(Some)
        }
        None if is_loopback(&options.listen) => Ok(None),
        None => Err(OptionsError::TokenRequired {
            listen: options.listen,
        }),
    }
}

/// The token is the first line, surrounding whitespace removed.
/// The token in a token file's text (its first line), checked as the
/// agent checks it; shared with the controller's `servers: [{token_file}]`.
pub fn token_from_text(text: &str, path: &Path) -> Result<String, OptionsError> {
    let token = text.lines().next().unwrap_or("").trim();
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(OptionsError::TokenNotPrintable {
            path: path.to_path_buf(),
        });
    }
    if token.len() < MIN_TOKEN_CHARS {
        return Err(OptionsError::TokenTooShort {
            path: path.to_path_buf(),
        });
    }
    Ok(token.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(listen: &str, token_file: Option<PathBuf>) -> AgentOptions {
        AgentOptions {
            listen: listen.parse().unwrap(),
            token_file,
            ..AgentOptions::default()
        }
    }

    fn temp_file(tag: &str, text: &str) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("autoperf-agent-token-{}-{tag}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn loopback_needs_no_token() {
        assert_eq!(resolve_token(&AgentOptions::default()).unwrap(), None);
        assert_eq!(resolve_token(&options("[::1]:1", None)).unwrap(), None);
        assert_eq!(
            resolve_token(&options("[::ffff:127.0.0.1]:1", None)).unwrap(),
            None
        );
    }

    #[test]
    fn off_loopback_without_token_file_is_refused() {
        for listen in ["0.0.0.0:9870", "192.0.2.7:9870", "[::]:9870"] {
            let err = resolve_token(&options(listen, None)).unwrap_err();
            assert!(
                matches!(err, OptionsError::TokenRequired { .. }),
                "{listen}"
            );
            assert!(err.to_string().contains("--token-file"));
        }
    }

    #[test]
    fn token_file_is_read_and_checked() {
        let good = temp_file("good", "0123456789abcdef-secret\nignored\n");
        let got = resolve_token(&options("0.0.0.0:9870", Some(good.clone()))).unwrap();
        assert_eq!(got.as_deref(), Some("0123456789abcdef-secret"));
        // Given on loopback too, it is required there as well.
        assert!(resolve_token(&options("127.0.0.1:1", Some(good.clone())))
            .unwrap()
            .is_some());
        std::fs::remove_file(good).unwrap();

        let short = temp_file("short", "tooshort\n");
        let err = resolve_token(&options("0.0.0.0:1", Some(short.clone()))).unwrap_err();
        assert!(matches!(err, OptionsError::TokenTooShort { .. }));
        std::fs::remove_file(short).unwrap();

        let spaced = temp_file("spaced", "0123456789 abcdef\n");
        let err = resolve_token(&options("0.0.0.0:1", Some(spaced.clone()))).unwrap_err();
        assert!(matches!(err, OptionsError::TokenNotPrintable { .. }));
        std::fs::remove_file(spaced).unwrap();

        let missing = std::env::temp_dir().join("autoperf-agent-no-such-token-file");
        let err = resolve_token(&options("0.0.0.0:1", Some(missing))).unwrap_err();
        assert!(matches!(err, OptionsError::TokenFile { .. }));
    }
}
