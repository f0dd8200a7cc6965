//! TLS for `https://` targets, with rustls: the client configuration made
//! once per transport from `target.tls` (its session cache is what lets a
//! user's reconnects resume instead of handshaking in full), and the
//! reasons a handshake failed, in words that name the fix.
//!
//! Verification is on by default against the platform's roots (the
//! system's certificate store, as curl and browsers use); `ca_file`
//! replaces them with the given CAs; `insecure` accepts any certificate.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_name, WebPkiServerVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::scenario::{BaseUrl, PemFile, TlsSettings};

/// What a transport needs to open TLS connections.
#[derive(Clone)]
pub(crate) struct Tls {
    pub connector: tokio_rustls::TlsConnector,
    pub server_name: ServerName<'static>,
    /// The server name as written, for messages.
    pub name: String,
}

/// Where a protocol's TLS settings are written, so that a message names
/// the setting to fix in the user's own terms.
pub(crate) struct SettingNames {
    pub ca_file: &'static str,
    pub client_cert: &'static str,
    /// The fix for a certificate no trusted CA signed.
    pub untrusted: &'static str,
    /// The fix for an expired certificate.
    pub expired: &'static str,
    /// The fix for a certificate that does not hold the name dialled.
    pub wrong_name: &'static str,
}

/// `target.tls` of an HTTPS target.
pub(crate) const HTTP_SETTINGS: SettingNames = SettingNames {
    ca_file: "target.tls.ca_file",
    client_cert: "target.tls.client_cert/client_key",
    untrusted:
        "give its CA as target.tls.ca_file, or set target.tls.insecure: true for a test system",
    expired: "renew it, or set target.tls.insecure: true for a test system",
    wrong_name: "aim base_url at a name it holds, or set target.tls.server_name to one",
};

/// A client configuration under `settings`, offering `alpn` (most
/// preferred first); an error names the setting to fix.
pub(crate) fn client_config(
    settings: &TlsSettings,
    alpn: &[&[u8]],
    names: &SettingNames,
) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS set-up: {e}"))?;
    let verifier: Arc<dyn ServerCertVerifier> = if settings.insecure {
        Arc::new(AcceptAny(provider))
    } else {
        let (roots, pinned) = match &settings.ca_file {
            Some(file) => {
                let pinned = read_certs(file)?;
                let mut roots = RootCertStore::empty();
                for cert in &pinned {
                    roots
                        .add(cert.clone())
                        .map_err(|e| format!("{} {}: {e}", names.ca_file, file.path.display()))?;
                }
                (roots, pinned)
            }
            None => (platform_roots(), Vec::new()),
        };
        let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| match &settings.ca_file {
                Some(file) => format!("{} {}: {e}", names.ca_file, file.path.display()),
                None => format!(
                    "this system has no usable CA certificates ({e}): give the server's CA as {}",
                    names.ca_file
                ),
            })?;
        Arc::new(CaFile {
            inner,
            pinned,
            any_name: settings.skip_hostname,
        })
    };
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut config = match (&settings.client_cert, &settings.client_key) {
        (Some(cert), Some(key)) => {
            let chain = read_certs(cert)?;
            let key = read_key(key).map_err(|e| format!("{}: {e}", names.client_cert))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("{}: {e}", names.client_cert))?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

impl Tls {
    /// The client of `base` under `settings`; an error names the setting
    /// to fix.
    /// `alpn`: the protocols offered, most preferred first.
    pub(crate) fn new(
        base: &BaseUrl,
        settings: &TlsSettings,
        alpn: &[&[u8]],
    ) -> Result<Tls, String> {
        let config = client_config(settings, alpn, &HTTP_SETTINGS)?;
        let name = settings
            .server_name
            .clone()
            .unwrap_or_else(|| base.host.clone());
        let server_name = ServerName::try_from(name.clone()).map_err(|_| {
            format!("`{name}` is not a valid TLS server name (target.tls.server_name)")
        })?;
        Ok(Tls {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            server_name,
            name,
        })
    }
}

impl Tls {
    /// The TLS handshake over a fresh TCP connection: the TLS connection,
    /// whether it resumed an earlier session, and whether the server chose
    /// HTTP/2.
    pub(crate) async fn connect(&self, tcp: TcpStream) -> std::io::Result<Shaken> {
        let stream = self
            .connector
            .connect(self.server_name.clone(), tcp)
            .await?;
        let session = stream.get_ref().1;
        Ok(Shaken {
            resumed: session.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
            h2: session.alpn_protocol() == Some(b"h2"),
            stream,
        })
    }
}

/// A TLS connection just made.
pub(crate) struct Shaken {
    pub stream: TlsStream<TcpStream>,
    pub resumed: bool,
    /// ALPN settled on `h2`.
    pub h2: bool,
}

fn platform_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        // A store may hold certificates rustls cannot use; the others
        // still verify.
        let _ = roots.add(cert);
    }
    roots
}

/// The certificates of a PEM file as the scenario read it.
fn read_certs(file: &PemFile) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(&file.pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", file.path.display()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no PEM certificate", file.path.display()));
    }
    Ok(certs)
}

fn read_key(file: &PemFile) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_slice(&file.pem)
        .map_err(|e| format!("{}: no usable private key ({e})", file.path.display()))
}

/// Why a handshake failed, with the fix, for the message that stops a run
/// at its start.
pub(crate) fn explain(error: &std::io::Error, host: &str, names: &SettingNames) -> String {
    let rustls_error = error
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>());
    use rustls::{CertificateError, Error};
    match rustls_error {
        Some(Error::InvalidCertificate(CertificateError::UnknownIssuer)) => format!(
            "the certificate of {host} is not signed by a trusted CA (self-signed, or the server leaves out an intermediate certificate its chain needs — `openssl s_client -showcerts` lists what it sends): {}",
            names.untrusted
        ),
        // A trusted CA's name, another key: a CA of the same name.
        Some(Error::InvalidCertificate(CertificateError::BadSignature)) => format!(
            "the certificate of {host} is not signed by a trusted CA (one of the same name, another key): {}",
            names.untrusted
        ),
        Some(Error::InvalidCertificate(CertificateError::Expired))
        | Some(Error::InvalidCertificate(CertificateError::ExpiredContext { .. })) => {
            format!("the certificate of {host} has expired: {}", names.expired)
        }
        Some(Error::InvalidCertificate(CertificateError::NotValidForName))
        | Some(Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })) => {
            format!(
                "the certificate of {host} is not valid for that name: {}",
                names.wrong_name
            )
        }
        Some(e) => format!("TLS handshake with {host} failed: {e}"),
        None => format!("TLS handshake with {host} failed: {error}"),
    }
}

/// Verification against the roots (`target.tls.ca_file`'s, or the
/// platform's): chains to them verify as usual; and a server that shows
/// exactly a certificate the CA file holds is trusted once its names match,
/// as curl does. That is the self-signed certificate of most test systems
/// (`openssl req -x509` marks it a CA, and webpki refuses a CA certificate
/// as a server's own). An expired one is still refused. `any_name` skips
/// the name check alone (Kafka's `ssl.endpoint.identification.algorithm`
/// set empty): the chain is still verified.
#[derive(Debug)]
struct CaFile {
    inner: Arc<WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
    any_name: bool,
}

impl ServerCertVerifier for CaFile {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError, Error};
        let verdict = self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        );
        let name_only = |e: &Error| {
            matches!(
                e,
                Error::InvalidCertificate(
                    CertificateError::NotValidForName
                        | CertificateError::NotValidForNameContext { .. }
                )
            )
        };
        match verdict {
            Err(e) if self.any_name && name_only(&e) => Ok(ServerCertVerified::assertion()),
            Err(Error::InvalidCertificate(
                CertificateError::Other(_) | CertificateError::UnknownIssuer,
            )) if self
                .pinned
                .iter()
                .any(|c| c.as_ref() == end_entity.as_ref()) =>
            {
                if !self.any_name {
                    verify_server_name(&ParsedCertificate::try_from(end_entity)?, server_name)?;
                }
                Ok(ServerCertVerified::assertion())
            }
            verdict => verdict,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// `target.tls.insecure: true`: every certificate is accepted, but the
/// handshake's signatures are still checked (a server must hold the key of
/// whatever certificate it shows).
#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
