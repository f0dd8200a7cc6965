//! A connection to one broker, as `security.protocol` says: TCP, then TLS
//! (`SSL`, `SASL_SSL`), then SASL (`SASL_PLAINTEXT`, `SASL_SSL`), before
//! any request. A failure of TLS or SASL carries the reason in words that
//! name the setting to fix, which is what stops a run at its start.

use std::pin::Pin;
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::super::sasl::Exchange;
use super::super::wire;
use super::config::{Config, KAFKA_TLS_SETTINGS};
use super::state::Idempotent;
use crate::measure::ErrorKind;
use crate::protocol::{net, tls};
use crate::scenario::{SaslMechanism, SaslSettings};

/// A connection to a broker, in the clear or over TLS.
pub(crate) enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

/// Why a connection could not be opened; `reason` is set where a setting
/// is to blame and names it.
#[derive(Debug, Clone)]
pub(crate) struct OpenError {
    pub kind: ErrorKind,
    pub reason: Option<String>,
}

impl From<ErrorKind> for OpenError {
    fn from(kind: ErrorKind) -> OpenError {
        OpenError { kind, reason: None }
    }
}

fn refused(kind: ErrorKind, reason: String) -> OpenError {
    OpenError {
        kind,
        reason: Some(reason),
    }
}

pub(super) fn io_kind(e: &std::io::Error) -> ErrorKind {
    // A TLS alert after the handshake (a client certificate the broker
    // wanted and did not get, say).
    if e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) {
        return ErrorKind::Tls;
    }
    net::io_kind(e, ErrorKind::Connect)
}

/// A connection just opened and secured.
pub(crate) struct Opened {
    pub conn: Conn,
    /// How long the broker keeps the SASL session (KIP-368): it closes the
    /// connection then. `None`: for as long as the connection lasts.
    pub session_lifetime: Option<std::time::Duration>,
}

/// Opens a connection to `addr` and secures it: TCP within the timeout
/// (`connect` if not), then TLS and SASL within it again (`timeout`).
pub(in crate::protocol::kafka) async fn open(
    addr: &str,
    config: &Config,
) -> Result<Opened, OpenError> {
    let tcp = match tokio::time::timeout(config.timeout, net::connect_named(addr)).await {
        Ok(connected) => connected?,
        Err(_) => return Err(ErrorKind::Connect.into()),
    };
    match tokio::time::timeout(config.timeout, secure(tcp, addr, config)).await {
        Ok(opened) => opened,
        Err(_) => Err(ErrorKind::Timeout.into()),
    }
}

async fn secure(tcp: TcpStream, addr: &str, config: &Config) -> Result<Opened, OpenError> {
    let mut conn = match &config.security.tls {
        None => Conn::Plain(tcp),
        Some(connector) => Conn::Tls(Box::new(handshake(connector, addr, tcp).await?)),
    };
    let session_lifetime = match &config.security.sasl {
        Some(sasl) => authenticate(&mut conn, sasl, &config.client_id, addr).await?,
        None => None,
    };
    Ok(Opened {
        conn,
        session_lifetime,
    })
}

async fn handshake(
    connector: &TlsConnector,
    addr: &str,
    tcp: TcpStream,
) -> Result<TlsStream<TcpStream>, OpenError> {
    let host = addr
        .rsplit_once(':')
        .map_or(addr, |(host, _)| host)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let name = ServerName::try_from(host.to_string()).map_err(|_| {
        refused(
            ErrorKind::Tls,
            format!("`{host}` is not a name TLS can verify (check bootstrap)"),
        )
    })?;
    connector.connect(name, tcp).await.map_err(|e| {
        let from_tls = e
            .get_ref()
            .is_some_and(|inner| inner.is::<rustls::Error>());
        let reason = if from_tls {
            tls::explain(&e, &format!("broker {addr}"), &KAFKA_TLS_SETTINGS)
        } else {
            // Closed or reset mid-handshake: most often a listener that
            // does not speak TLS.
            format!(
                "the TLS handshake with broker {addr} failed ({e}): is that port a TLS listener? check security.protocol and bootstrap"
            )
        };
        refused(ErrorKind::Tls, reason)
    })
}

/// SASL over `conn`: SaslHandshake names the mechanism, then
/// SaslAuthenticate requests carry its exchange until it is done. Returns
/// the session's lifetime, if the broker limits it.
async fn authenticate(
    conn: &mut Conn,
    sasl: &SaslSettings,
    client_id: &str,
    addr: &str,
) -> Result<Option<std::time::Duration>, OpenError> {
    let mechanism = sasl.mechanism.name();
    let mut out = Vec::new();
    wire::sasl_handshake_request(&mut out, 0, client_id, mechanism);
    let body = round_trip(conn, &out).await?;
    let (error, offered) =
        wire::sasl_handshake_response(&body).map_err(|_| ErrorKind::Malformed)?;
    match error {
        0 => {}
        // UNSUPPORTED_SASL_MECHANISM
        33 => {
            return Err(refused(
                ErrorKind::KafkaBroker,
                format!(
                    "broker {addr} does not take sasl.mechanism {mechanism} on this listener; it takes {}: set sasl.mechanism to one of them",
                    offered.join(", ")
                ),
            ))
        }
        // ILLEGAL_SASL_STATE: not a SASL listener at all.
        34 => {
            return Err(refused(
                ErrorKind::KafkaBroker,
                format!("broker {addr} is not a SASL listener: check security.protocol and bootstrap"),
            ))
        }
        code => {
            return Err(refused(
                ErrorKind::KafkaBroker,
                format!("broker {addr} refused the SASL handshake (Kafka error code {code})"),
            ))
        }
    }
    let mut exchange = Exchange::new(sasl);
    let mut message = Some(exchange.first());
    let mut correlation = 1;
    let mut lifetime = None;
    while let Some(m) = message {
        out.clear();
        wire::sasl_authenticate_request(&mut out, correlation, client_id, &m);
        correlation += 1;
        let body = round_trip(conn, &out).await?;
        let answer = wire::sasl_authenticate_response(&body).map_err(|_| ErrorKind::Malformed)?;
        if answer.error != 0 {
            let why = answer.message.unwrap_or("no reason given");
            let reason = match sasl.mechanism {
                SaslMechanism::OAuthBearer => format!(
                    "broker {addr} refused the token of sasl.oauthbearer.token ({why}): check that it is valid, unexpired and for this cluster"
                ),
                _ => format!(
                    "broker {addr} refused sasl.username `{}` with its sasl.password ({why}): check both, and that the user exists for {mechanism}",
                    sasl.username
                ),
            };
            return Err(refused(ErrorKind::KafkaBroker, reason));
        }
        lifetime = (answer.session_lifetime_ms > 0)
            .then(|| std::time::Duration::from_millis(answer.session_lifetime_ms as u64));
        message = exchange.next(answer.bytes).map_err(|why| {
            refused(
                ErrorKind::KafkaBroker,
                format!("SASL {mechanism} with broker {addr} failed: {why}"),
            )
        })?;
    }
    Ok(lifetime)
}

/// A producer id of its own for a connection (see `Idempotent`); an error
/// the user can fix names `enable.idempotence`.
pub(super) async fn init_producer_id(
    conn: &mut Conn,
    config: &Config,
) -> Result<Idempotent, OpenError> {
    let mut out = Vec::new();
    let mut correlation = 0;
    let (error, producer_id, epoch) = loop {
        out.clear();
        wire::init_producer_id_request(&mut out, correlation, &config.client_id);
        correlation += 1;
        let body = round_trip(conn, &out).await?;
        let answer = wire::init_producer_id_response(&body).map_err(|_| ErrorKind::Malformed)?;
        // COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
        // NOT_COORDINATOR: a broker just started hands out ids in a moment
        // (the caller's timeout bounds the wait).
        if !matches!(answer.0, 14..=16) {
            break answer;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    match error {
        0 => Ok(Idempotent::new(producer_id, epoch)),
        // CLUSTER_AUTHORIZATION_FAILED: no IDEMPOTENT_WRITE for this user.
        31 => Err(refused(
            ErrorKind::KafkaBroker,
            "the broker does not let this user write idempotently (the IdempotentWrite operation on the cluster): grant it, or set enable.idempotence: false".into(),
        )),
        code => Err(refused(
            ErrorKind::KafkaBroker,
            format!("the broker refused a producer id (InitProducerId, Kafka error code {code}); set enable.idempotence: false to produce without one"),
        )),
    }
}

/// Asks a bootstrap broker for a producer id, as every connection will:
/// the start-of-run check that idempotence is allowed.
pub(in crate::protocol::kafka) async fn probe_producer_id(
    config: &Config,
) -> Result<(), OpenError> {
    let mut last = OpenError::from(ErrorKind::Connect);
    for addr in &config.bootstrap {
        let asked = async {
            let mut opened = open(addr, config).await?;
            init_producer_id(&mut opened.conn, config).await
        };
        match tokio::time::timeout(config.timeout, asked).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(e)) if e.reason.is_some() => return Err(e),
            Ok(Err(e)) => last = e,
            Err(_) => last = ErrorKind::Timeout.into(),
        }
    }
    Err(last)
}

/// Sends one request and reads its answer: the body after the
/// correlation id.
pub(in crate::protocol::kafka) async fn round_trip(
    conn: &mut Conn,
    request: &[u8],
) -> Result<Vec<u8>, ErrorKind> {
    conn.write_all(request).await.map_err(|e| io_kind(&e))?;
    let mut size = [0u8; 4];
    conn.read_exact(&mut size).await.map_err(|e| io_kind(&e))?;
    let size = usize::try_from(i32::from_be_bytes(size))
        .ok()
        .filter(|&size| (4..=wire::MAX_RESPONSE).contains(&size))
        .ok_or(ErrorKind::Malformed)?;
    let mut body = vec![0; size];
    conn.read_exact(&mut body).await.map_err(|e| io_kind(&e))?;
    body.drain(..4);
    Ok(body)
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
