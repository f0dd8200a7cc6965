//! The web tier's HTTPS port: a certificate made at start with rcgen, for
//! `localhost` and the loopback addresses, signed by itself. Its PEM is
//! written to a file a client can trust (`target.tls.ca_file`), removed
//! when the tier stops.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use tokio_rustls::TlsAcceptor;

/// A fresh self-signed certificate, served by the acceptor and written to
/// `file` (PEM).
pub struct SelfSigned {
    pub acceptor: TlsAcceptor,
    pub file: PathBuf,
}

impl SelfSigned {
    pub fn make() -> anyhow::Result<SelfSigned> {
        let names = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
        let certified =
            rcgen::generate_simple_self_signed(names).context("making a certificate")?;
        let pem = certified.cert.pem();
        let file =
            std::env::temp_dir().join(format!("autoperf-testbed-{}.pem", std::process::id()));
        std::fs::write(&file, &pem).with_context(|| format!("writing {}", file.display()))?;
        let key =
            rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS versions")?
            .with_no_client_auth()
            .with_single_cert(vec![certified.cert.der().clone()], key)
            .context("TLS certificate")?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(SelfSigned {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            file,
        })
    }
}

impl Drop for SelfSigned {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}
