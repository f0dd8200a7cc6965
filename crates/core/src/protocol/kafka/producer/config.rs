//! What the producer is told: its settings, shared by every shard, and
//! what its connections need beyond TCP (TLS, SASL).

use std::sync::Arc;
use std::time::Duration;

use tokio_rustls::TlsConnector;

use crate::protocol::tls;
use crate::scenario::SaslSettings;

/// The producer's settings, shared by every shard.
#[derive(Debug, Clone)]
pub struct Config {
    pub bootstrap: Vec<String>,
    pub client_id: String,
    /// 0, 1 or -1 (all in-sync replicas).
    pub acks: i16,
    pub linger: Duration,
    pub batch_bytes: usize,
    /// Produce requests awaiting their answer, per broker connection.
    pub max_in_flight: usize,
    /// Per request, and for connecting and metadata.
    pub timeout: Duration,
    /// Metadata older than this is asked again.
    pub metadata_max_age: Duration,
    /// `retry.backoff.ms` and `delivery.timeout.ms`: a batch refused with a
    /// retriable error goes again after the first, until the second has
    /// passed since it was first sent.
    pub retry_backoff: Duration,
    pub delivery_timeout: Duration,
    pub compression: crate::scenario::Compression,
    pub compression_level: Option<i32>,
    /// TLS and SASL, as `security.protocol` says.
    pub security: Security,
    /// `enable.idempotence`: batches carry a producer id and sequence
    /// numbers, and the broker writes none twice.
    pub idempotence: bool,
}

/// What the producer's connections need beyond TCP.
#[derive(Clone, Default)]
pub struct Security {
    pub tls: Option<TlsConnector>,
    pub sasl: Option<SaslSettings>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl)
            .finish()
    }
}

/// Where a Kafka target's TLS settings are written (librdkafka's names,
/// which Java's PEM settings mirror).
pub(crate) const KAFKA_TLS_SETTINGS: tls::SettingNames = tls::SettingNames {
    ca_file: "ssl.ca.location",
    client_cert: "ssl.certificate.location/ssl.key.location",
    untrusted: "give its CA as ssl.ca.location, or set enable.ssl.certificate.verification: false for a test system",
    expired: "renew it, or set enable.ssl.certificate.verification: false for a test system",
    wrong_name: "bootstrap and the broker's advertised listeners must use a name it holds, or set ssl.endpoint.identification.algorithm: none",
};

impl Security {
    /// The TLS client of `settings`, if TLS is on.
    pub(crate) fn tls_connector(
        settings: &crate::scenario::TlsSettings,
    ) -> Result<TlsConnector, String> {
        let config = tls::client_config(settings, &[], &KAFKA_TLS_SETTINGS)?;
        Ok(TlsConnector::from(Arc::new(config)))
    }
}
