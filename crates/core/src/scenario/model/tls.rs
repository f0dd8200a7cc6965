//! TLS settings and the PEM files they name, shared by an `https://`
//! target (`target.tls`) and a Kafka cluster's `ssl.*` settings.

use std::path::PathBuf;

/// `target.tls`: certificate verification is on unless `insecure`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// Trust these CA certificates (PEM) instead of the platform's roots.
    pub ca_file: Option<PemFile>,
    /// Accept any certificate (test systems only).
    pub insecure: bool,
    /// The name sent in SNI and checked against the certificate (default:
    /// the base URL's host).
    pub server_name: Option<String>,
    /// A client certificate chain and its key (PEM), for mutual TLS.
    pub client_cert: Option<PemFile>,
    pub client_key: Option<PemFile>,
    /// Verify the chain but not that it names the host (Kafka's
    /// `ssl.endpoint.identification.algorithm` set empty).
    pub skip_hostname: bool,
}

/// A PEM file a setting names: where it was, and what it held when the
/// scenario was decoded. TLS is set up from the bytes, so a worker on
/// another host needs no copy of the file (they are shipped with its job).
#[derive(Clone, PartialEq, Eq)]
pub struct PemFile {
    pub path: PathBuf,
    pub pem: Vec<u8>,
}

impl std::fmt::Debug for PemFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never a private key's bytes.
        write!(
            f,
            "PemFile({}, {} bytes)",
            self.path.display(),
            self.pem.len()
        )
    }
}
