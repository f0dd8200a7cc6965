//! The controller–worker protocol: JSON lines over one TCP connection per
//! level — the generator processes' job and snapshots, grown for the
//! network with a version, an authentication and a clock.
//!
//! ```text
//!   worker ─ Greeting {protocol, version, name, nonce} ─→ controller
//!   controller ─ Hello {version, proof = HMAC(token, nonce), nonce'} ─→ worker
//!   worker ─ Welcome {proof' = HMAC(token, nonce'), cores, limits, addresses}
//!          | Refused {reason}
//!   controller ─ Ping ─→ ← Pong {now_ns}        (×8: the clock offset)
//!   controller ─ Probe {scenario} ─→ ← Probed {error}      (before a run)
//!   controller ─ Run {job} ─→ ← Ready | Failed {reason}  (scenario decoded)
//!   controller ─ Go {start, deadline} ─→   (on the worker's clock)
//!                            ← Snapshot {…} every second per shard
//!   controller ─ Stop ─→     ← Done {trouble}   (and the connection ends)
//! ```
//!
//! The token never crosses the wire: each side sends a fresh nonce and the
//! other proves it holds the token with an HMAC of it (bound to its role,
//! so a proof cannot be reflected back), so a worker takes jobs only from
//! a controller with the token and a controller sends its job (which
//! carries the scenario's files and variables) only to a worker with it.
//! The connection is not encrypted: keep it on a network you trust. A
//! different protocol version on either side is refused with both
//! versions named.

use std::io::{BufRead, Read, Write};
use std::net::IpAddr;

use ring::hmac;
use serde::{Deserialize, Serialize};

use crate::engine::fleet::{Job, Limits, ScenarioSource};
use crate::measure::wire::WireSnapshot;

pub(crate) const PROTOCOL: &str = "autoperf-worker";
/// Bumped whenever a message changes meaning: both sides must agree.
pub const VERSION: u32 = 1;

/// autoperf's own version, named when the protocol versions differ.
pub(crate) fn release() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum FromWorker {
    Greeting {
        protocol: String,
        version: u32,
        release: String,
        /// The worker's name (its host name unless given), for messages.
        name: String,
        /// Fresh per connection, hex: what the controller's proof signs.
        nonce: String,
    },
    Welcome {
        /// HMAC-SHA256 of the controller's nonce under the token, hex;
        /// none without a token.
        proof: Option<String>,
        /// Cores the worker may use (its CPU affinity and quota).
        cores: usize,
        /// Cores' worth of CPU, fractional under a CPU quota: the weight
        /// its share of a level gets.
        cpu: f64,
        limits: Limits,
        /// Source addresses it was told to connect from (empty: any).
        local_addresses: Vec<IpAddr>,
    },
    Refused {
        reason: String,
    },
    Pong {
        /// The worker's CLOCK_MONOTONIC when it answered.
        now_ns: u64,
    },
    Probed {
        error: Option<String>,
    },
    /// The job's scenario is decoded: the worker waits for `Go`.
    Ready,
    Snapshot {
        // Boxed: far larger than the other messages (serde sees through it).
        snapshot: Box<WireSnapshot>,
    },
    /// The job ended; `trouble`: its generator processes that died.
    Done {
        trouble: Vec<String>,
    },
    Failed {
        reason: String,
    },
}

// A `Run` is sent once per level and worker: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum ToWorker {
    Hello {
        version: u32,
        release: String,
        /// HMAC-SHA256 of the worker's nonce under the token, hex; none
        /// without a token.
        proof: Option<String>,
        /// Fresh, hex: what the worker's proof signs.
        nonce: String,
    },
    Ping,
    /// Can the worker reach the scenario's target?
    Probe {
        scenario: ScenarioSource,
    },
    /// A level's share; its clock comes with `Go`, once every worker is
    /// ready.
    Run {
        job: Job,
        /// Shards of each generator process the worker starts (one entry:
        /// the worker's own process runs them all).
        process_shards: Vec<usize>,
    },
    Go {
        /// The level's start and deadline on the worker's CLOCK_MONOTONIC.
        start_ns: u64,
        deadline_ns: u64,
    },
    Stop,
    Bye,
}

/// The longest line either side takes: a job carries the scenario's data
/// files (CSV up to 1 GiB, as base64).
pub(crate) const MAX_JOB_LINE: u64 = 1_500 << 20;
/// The longest line of anything else.
pub(crate) const MAX_LINE: u64 = 64 << 20;
/// The longest hello a worker reads from a connection not yet
/// authenticated.
pub(crate) const MAX_HELLO: u64 = 64 << 10;

/// Reads one message; `Ok(None)` at the end of the stream.
pub(crate) fn read<T: for<'de> Deserialize<'de>>(
    input: &mut impl BufRead,
    limit: u64,
) -> std::io::Result<Option<T>> {
    let mut line = Vec::new();
    let n = input.by_ref().take(limit).read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        let why = if n as u64 >= limit {
            format!("a message longer than {limit} bytes")
        } else {
            "a message cut short".to_string()
        };
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, why));
    }
    serde_json::from_slice(&line)
        .map(Some)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Writes one message as a line and flushes it.
pub(crate) fn write<T: Serialize>(output: &mut impl Write, message: &T) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    output.write_all(&line)?;
    output.flush()
}

/// A fresh nonce, hex.
pub(crate) fn nonce() -> String {
    let mut bytes = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .expect("the system's random source works");
    hex(&bytes)
}

/// Who proves holding the token: each side signs the other's nonce under
/// its own role, so one side's proof is never the other's.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Role {
    Controller,
    Worker,
}

/// `role`'s proof that it holds `token`, for the other side's `nonce`.
pub(crate) fn proof(token: &str, nonce: &str, role: Role) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, token.as_bytes());
    hex(hmac::sign(&key, &signed(nonce, role)).as_ref())
}

/// Whether `proof` is `role`'s proof of `token` for `nonce` (in constant
/// time).
pub(crate) fn verify(token: &str, nonce: &str, role: Role, proof: &str) -> bool {
    let Some(tag) = unhex(proof) else {
        return false;
    };
    let key = hmac::Key::new(hmac::HMAC_SHA256, token.as_bytes());
    hmac::verify(&key, &signed(nonce, role), &tag).is_ok()
}

/// What a proof signs: the nonce, bound to this protocol, its version and
/// the prover's role.
fn signed(nonce: &str, role: Role) -> Vec<u8> {
    format!("{PROTOCOL}/{VERSION}/{role:?}:{nonce}").into_bytes()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_holds_for_its_token_and_nonce_only() {
        let token = "0123456789abcdef-worker";
        let n = nonce();
        assert_eq!(n.len(), 32);
        let p = proof(token, &n, Role::Controller);
        assert!(verify(token, &n, Role::Controller, &p));
        assert!(!verify(token, &n, Role::Worker, &p), "reflected");
        assert!(!verify("0123456789abcdef-other", &n, Role::Controller, &p));
        assert!(!verify(token, &nonce(), Role::Controller, &p));
        assert!(!verify(token, &n, Role::Controller, &p[..p.len() - 2]));
        assert!(!verify(token, &n, Role::Controller, "zz"));
    }

    #[test]
    fn messages_travel_as_lines_and_overlong_ones_are_refused() {
        let mut buf = Vec::new();
        write(&mut buf, &ToWorker::Ping).unwrap();
        write(&mut buf, &ToWorker::Stop).unwrap();
        let mut input = &buf[..];
        assert!(matches!(
            read(&mut input, 100).unwrap(),
            Some(ToWorker::Ping)
        ));
        assert!(matches!(
            read(&mut input, 100).unwrap(),
            Some(ToWorker::Stop)
        ));
        assert!(read::<ToWorker>(&mut input, 100).unwrap().is_none());
        let mut long = Vec::new();
        write(
            &mut long,
            &FromWorker::Refused {
                reason: "x".repeat(200),
            },
        )
        .unwrap();
        let e = read::<FromWorker>(&mut &long[..], 100).unwrap_err();
        assert!(e.to_string().contains("longer than 100"), "{e}");
        let e = read::<FromWorker>(&mut &b"{\"type\":\"ready\""[..], 100).unwrap_err();
        assert!(e.to_string().contains("cut short"), "{e}");
    }
}
