//! `https://` targets as a user runs them: a TLS server written here on
//! 127.0.0.1:0 with certificates made by rcgen — signed by a test CA, self
//! signed, expired, for another host — that counts what it saw (full and
//! resumed handshakes, requests). Verification is on by default, so every
//! bad certificate must stop the run at its start with exit 3 and the fix.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A CA and a leaf certificate it signed.
struct Pki {
    ca_pem: String,
    leaf_pem: String,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

enum Leaf {
    /// Signed by the CA, for 127.0.0.1 and localhost.
    Good,
    /// Signed by the CA, but expired in 2020.
    Expired,
    /// Signed by the CA, for another host.
    OtherHost,
    /// Signed by itself.
    SelfSigned,
    /// Signed by itself and marked a CA, as `openssl req -x509` makes them.
    SelfSignedCa,
    /// The same, for another host.
    SelfSignedCaOtherHost,
}

fn pki(leaf: Leaf) -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let names = match leaf {
        Leaf::OtherHost | Leaf::SelfSignedCaOtherHost => vec!["other.example".to_string()],
        _ => vec!["127.0.0.1".to_string(), "localhost".to_string()],
    };
    let mut params = CertificateParams::new(names).unwrap();
    if let Leaf::SelfSignedCa | Leaf::SelfSignedCaOtherHost = leaf {
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    }
    if let Leaf::Expired = leaf {
        params.not_before = rcgen::date_time_ymd(2019, 1, 1);
        params.not_after = rcgen::date_time_ymd(2020, 1, 1);
    }
    let key = KeyPair::generate().unwrap();
    let cert = match leaf {
        Leaf::SelfSigned | Leaf::SelfSignedCa | Leaf::SelfSignedCaOtherHost => {
            params.self_signed(&key).unwrap()
        }
        _ => params.signed_by(&key, &issuer).unwrap(),
    };
    Pki {
        ca_pem: ca.pem(),
        leaf_pem: cert.pem(),
        chain: vec![cert.der().clone()],
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    }
}

#[derive(Default)]
struct Seen {
    handshakes: AtomicU64,
    resumed: AtomicU64,
    requests: AtomicU64,
}

/// A TLS server answering every request with `200 ok`; with `close`, it
/// closes each connection after one response, so every request reconnects.
fn server(pki: &Pki, close: bool) -> (SocketAddr, Arc<Seen>) {
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(pki.chain.clone(), pki.key.clone_key())
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let counts = seen.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            // The test process ends the thread; a bound on connections keeps
            // a runaway client from looping here forever.
            for _ in 0..100_000 {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let acceptor = acceptor.clone();
                let seen = counts.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                    seen.handshakes.fetch_add(1, Ordering::Relaxed);
                    if tls.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                        seen.resumed.fetch_add(1, Ordering::Relaxed);
                    }
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        let Ok(n) = tls.read(&mut chunk).await else { return };
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            buf.drain(..end + 4);
                            seen.requests.fetch_add(1, Ordering::Relaxed);
                            let reply: &[u8] = if close {
                                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                            } else {
                                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                            };
                            if tls.write_all(reply).await.is_err() {
                                return;
                            }
                            if close {
                                let _ = tls.shutdown().await;
                                return;
                            }
                        }
                    }
                });
            }
        });
    });
    (addr, seen)
}

fn scenario(dir: &Path, name: &str, base_url: &str, tls: &str) -> String {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        format!(
            "name: {name}\ntarget: {{base_url: \"{base_url}\", timeout: 5s{tls}}}\nthink_time: 10ms\nrequests:\n  home: {{path: /}}\n"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

fn run(scenario: &str, out: &Path) -> (Option<i32>, String) {
    let (code, stdout, stderr) = support::run_briefly(scenario, "2", out);
    (code, format!("{stdout}{stderr}"))
}

#[test]
fn a_ca_file_verifies_the_target_and_handshakes_are_timed_apart() {
    let dir = support::scratch_dir("https-ca");
    let pki = pki(Leaf::Good);
    std::fs::write(dir.join("ca.pem"), &pki.ca_pem).unwrap();
    let (addr, seen) = server(&pki, false);
    let s = scenario(
        &dir,
        "ca",
        &format!("https://{addr}"),
        ", tls: {ca_file: ca.pem}",
    );
    let out = dir.join("out");
    let (code, output) = run(&s, &out);
    assert_eq!(code, Some(0), "{output}");
    let level = &support::run_json(&out)["levels"][0];
    assert!(level["requests"].as_u64().unwrap() > 20, "{level}");
    assert_eq!(level["errors"], 0, "{level}");
    let client = &level["client"];
    // Both users' connections were made in the warm-up-free window.
    assert!(client["tls_handshakes"].as_u64().unwrap() >= 2, "{client}");
    assert!(
        client["tls_handshake_ms"].as_f64().unwrap() > 0.0,
        "{client}"
    );
    // The probe's handshake and the users': the server saw every one.
    assert!(seen.handshakes.load(Ordering::Relaxed) >= 3);
    assert!(seen.requests.load(Ordering::Relaxed) >= level["requests"].as_u64().unwrap());
    // localhost is on the certificate too, and resolves to loopback.
    let s = scenario(
        &dir,
        "by-name",
        &format!("https://localhost:{}", addr.port()),
        ", tls: {ca_file: ca.pem}",
    );
    let (code, output) = run(&s, &dir.join("out-name"));
    assert_eq!(code, Some(0), "{output}");
}

#[test]
fn reconnecting_users_resume_their_tls_sessions() {
    let dir = support::scratch_dir("https-resume");
    let pki = pki(Leaf::Good);
    std::fs::write(dir.join("ca.pem"), &pki.ca_pem).unwrap();
    let (addr, seen) = server(&pki, true);
    let s = scenario(
        &dir,
        "resume",
        &format!("https://{addr}"),
        ", tls: {ca_file: ca.pem}",
    );
    let out = dir.join("out");
    let (code, output) = run(&s, &out);
    assert_eq!(code, Some(0), "{output}");
    let client = &support::run_json(&out)["levels"][0]["client"];
    let handshakes = client["tls_handshakes"].as_u64().unwrap();
    let resumed = client["tls_resumed"].as_u64().unwrap();
    // Every request needs a new connection; all but the first few resume.
    assert!(handshakes > 20, "{client}");
    assert!(resumed * 10 >= handshakes * 8, "{client}");
    assert!(seen.resumed.load(Ordering::Relaxed) >= resumed);
}

#[test]
fn insecure_accepts_a_self_signed_certificate() {
    let dir = support::scratch_dir("https-insecure");
    let pki = pki(Leaf::SelfSigned);
    let (addr, _) = server(&pki, false);
    let s = scenario(
        &dir,
        "insecure",
        &format!("https://{addr}"),
        ", tls: {insecure: true}",
    );
    let (code, output) = run(&s, &dir.join("out"));
    assert_eq!(code, Some(0), "{output}");
}

#[test]
fn a_self_signed_certificate_given_as_ca_file_is_trusted_for_its_names() {
    // webpki refuses a CA certificate as a server's own; curl trusts the
    // very certificate it was given, and so does autoperf.
    let dir = support::scratch_dir("https-pinned");
    for (leaf, name, code) in [
        (Leaf::SelfSignedCa, "pinned", Some(0)),
        (Leaf::SelfSignedCaOtherHost, "pinned-other-host", Some(3)),
    ] {
        let pki = pki(leaf);
        std::fs::write(dir.join(format!("{name}.pem")), &pki.leaf_pem).unwrap();
        let (addr, seen) = server(&pki, false);
        let s = scenario(
            &dir,
            name,
            &format!("https://{addr}"),
            &format!(", tls: {{ca_file: {name}.pem}}"),
        );
        let (got, output) = run(&s, &dir.join(format!("out-{name}")));
        assert_eq!(got, code, "{name}: {output}");
        if code == Some(0) {
            assert!(seen.requests.load(Ordering::Relaxed) > 0);
        } else {
            assert!(
                output.contains("not valid for that name"),
                "{name}: {output}"
            );
        }
    }
}

#[test]
fn bad_certificates_stop_the_run_at_its_start_with_the_fix() {
    let dir = support::scratch_dir("https-bad");
    // Self-signed, verified against the platform's roots.
    let (addr, _) = server(&pki(Leaf::SelfSigned), false);
    let s = scenario(&dir, "self", &format!("https://{addr}"), "");
    let (code, output) = run(&s, &dir.join("out-self"));
    assert_eq!(code, Some(3), "{output}");
    assert!(
        output.contains("target.tls.ca_file") && output.contains("target.tls.insecure"),
        "{output}"
    );
    for (leaf, name, says) in [
        (Leaf::Expired, "expired", "has expired"),
        (Leaf::OtherHost, "other-host", "not valid for that name"),
    ] {
        let pki = pki(leaf);
        std::fs::write(dir.join(format!("{name}.pem")), &pki.ca_pem).unwrap();
        let (addr, seen) = server(&pki, false);
        let s = scenario(
            &dir,
            name,
            &format!("https://{addr}"),
            &format!(", tls: {{ca_file: {name}.pem}}"),
        );
        let (code, output) = run(&s, &dir.join(format!("out-{name}")));
        assert_eq!(code, Some(3), "{name}: {output}");
        assert!(output.contains(says), "{name}: {output}");
        assert_eq!(seen.requests.load(Ordering::Relaxed), 0, "{name}");
    }
}

#[test]
fn check_explains_tls_settings() {
    let dir = support::scratch_dir("https-check");
    let s = scenario(
        &dir,
        "plain",
        "http://127.0.0.1:1",
        ", tls: {insecure: true}",
    );
    let (code, _, stderr) = support::autoperf(&["check", &s]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("https://") && stderr.contains(":2:"),
        "{stderr}"
    );
    let s = scenario(
        &dir,
        "missing",
        "https://127.0.0.1:1",
        ", tls: {ca_file: nope.pem}",
    );
    let (code, _, stderr) = support::autoperf(&["check", &s]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("nope.pem"), "{stderr}");
    std::fs::write(dir.join("key.pem"), "-----BEGIN PRIVATE KEY-----\n").unwrap();
    let s = scenario(
        &dir,
        "half",
        "https://127.0.0.1:1",
        ", tls: {client_key: key.pem}",
    );
    let (code, _, stderr) = support::autoperf(&["check", &s]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("go together"), "{stderr}");
}
