//! `target: {kafka: …}`: the cluster, the producer's settings under the
//! names Java's and librdkafka's producers use, acks, and how connections
//! are secured (TLS, SASL).

use std::time::Duration;

use super::tls::TlsSettings;

/// `target: {kafka: …}`: the cluster and the producer's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct KafkaTarget {
    /// `host:port[,host:port…]`, as Kafka clients' `bootstrap.servers`.
    pub bootstrap: String,
    pub acks: Acks,
    /// `settings:`, under the names Java's and librdkafka's producers use.
    pub producer: ProducerSettings,
    /// `security.protocol` and its `ssl.*` and `sasl.*` settings.
    pub security: KafkaSecurity,
}

impl KafkaTarget {
    /// A cluster reached over plaintext with every setting at its default:
    /// what the testbed's consumer tier connects with.
    pub fn plaintext(bootstrap: &str) -> KafkaTarget {
        KafkaTarget {
            bootstrap: bootstrap.to_string(),
            acks: Acks::All,
            producer: ProducerSettings::default(),
            security: KafkaSecurity::default(),
        }
    }
}

/// How the producer's connections are secured: `security.protocol`
/// `PLAINTEXT` (neither), `SSL` (TLS), `SASL_PLAINTEXT` (SASL) or
/// `SASL_SSL` (both).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KafkaSecurity {
    pub tls: Option<TlsSettings>,
    pub sasl: Option<SaslSettings>,
}

/// `sasl.mechanism`, `sasl.username`, `sasl.password`; for OAUTHBEARER,
/// `sasl.oauthbearer.token` in `password` and no username.
#[derive(Clone, PartialEq)]
pub struct SaslSettings {
    pub mechanism: SaslMechanism,
    pub username: String,
    /// The password, or OAUTHBEARER's bearer token.
    pub password: String,
}

impl std::fmt::Debug for SaslSettings {
    // The password stays out of logs and panics.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslSettings")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// The SASL mechanisms autoperf's producer speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    /// A static bearer token (RFC 7628), as a test or a CI job has one.
    OAuthBearer,
}

impl SaslMechanism {
    pub(crate) const ALL: [SaslMechanism; 4] = [
        SaslMechanism::Plain,
        SaslMechanism::ScramSha256,
        SaslMechanism::ScramSha512,
        SaslMechanism::OAuthBearer,
    ];

    /// Its name in `sasl.mechanism` and on the wire.
    pub(crate) fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<SaslMechanism> {
        Self::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(text))
    }
}

/// How the producer batches; the defaults are librdkafka's (Java's
/// `batch.size` is 16 KiB), but for idempotence, on as in Java's producer.
#[derive(Debug, Clone, PartialEq)]
pub struct ProducerSettings {
    /// `linger.ms`: how long a batch waits for more records.
    pub linger: Duration,
    /// `batch.size`: a partition's batch goes out at this many bytes.
    pub batch_bytes: u32,
    /// `max.in.flight.requests.per.connection`.
    pub max_in_flight: u32,
    /// `client.id`.
    pub client_id: String,
    /// `metadata.max.age.ms`: partitions and leaders are asked again this
    /// often, so partitions added during a run get their keys' records.
    pub metadata_max_age: Duration,
    /// `compression.type`: how each batch's records are compressed.
    pub compression: Compression,
    /// `compression.level` (`compression.gzip.level`, …): the codec's own
    /// scale; `None` for its default.
    pub compression_level: Option<i32>,
    /// `enable.idempotence`: on by default where acks is all and at most 5
    /// requests are in flight, as Java's producer since Kafka 3.0.
    pub idempotence: bool,
    /// `retry.backoff.ms`: the wait before a batch the broker refused for
    /// a passing reason (a leader moving) is sent again.
    pub retry_backoff: Duration,
    /// `delivery.timeout.ms`: how long after its first send a batch may
    /// still be retried; past it, a retriable error fails its records.
    pub delivery_timeout: Duration,
}

/// A record batch's codec, as Kafka numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    pub(crate) fn parse(name: &str) -> Option<Compression> {
        Some(match name {
            "none" | "uncompressed" => Compression::None,
            "gzip" => Compression::Gzip,
            "snappy" => Compression::Snappy,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            _ => return None,
        })
    }

    /// Its `compression.type` name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// The levels the codec takes, `None` for a codec without levels here.
    pub(crate) fn levels(self) -> Option<std::ops::RangeInclusive<i32>> {
        match self {
            Compression::Gzip => Some(1..=9),
            Compression::Zstd => Some(1..=22),
            _ => None,
        }
    }
}

impl Default for ProducerSettings {
    fn default() -> Self {
        ProducerSettings {
            linger: Duration::from_millis(5),
            batch_bytes: 1_000_000,
            max_in_flight: 5,
            client_id: "autoperf".to_string(),
            // Java's producer's default.
            metadata_max_age: Duration::from_secs(300),
            compression: Compression::None,
            compression_level: None,
            idempotence: true,
            // Java's producer's defaults.
            retry_backoff: Duration::from_millis(100),
            delivery_timeout: Duration::from_secs(120),
        }
    }
}

/// How many replicas must have a record before the broker acknowledges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// Fire and forget: the "acknowledgement" is the send itself.
    None,
    /// The partition leader has it.
    Leader,
    /// Every in-sync replica has it.
    All,
}

impl Acks {
    /// The `acks` field of a Produce request.
    pub(crate) fn code(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }

    /// As written in `acks`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        }
    }
}
