//! `target.kafka`: the cluster, `acks`, and the producer's `settings`
//! under the names Java's and librdkafka's producers use, security
//! (`security.protocol`, `ssl.*`, `sasl.*`) included.

use std::path::Path;
use std::time::Duration;

use super::super::model::*;
use super::super::yaml::{Node, Pos};
use super::ctx::Ctx;
use super::tls::{pem_file, Pem};

pub(crate) const KAFKA_KEYS: &[&str] = &["bootstrap", "acks", "settings"];

/// `kafka: {bootstrap, acks, settings}`.
pub(super) fn decode_kafka(ctx: &mut Ctx, node: &Node, base_dir: &Path) -> Option<KafkaTarget> {
    let fields = ctx.map(node, "`kafka`", KAFKA_KEYS)?;
    if !cfg!(feature = "kafka") {
        ctx.error(
            fields.pos,
            "this autoperf was built without Kafka support (cargo feature `kafka`)",
        );
        return None;
    }
    let bootstrap = fields.required(ctx, "bootstrap").and_then(|n| {
        let text = ctx.setting(n, "broker addresses like `127.0.0.1:9092`")?;
        let ok = text.split(',').all(|broker| {
            let broker = broker.trim();
            let broker = broker.split_once("://").map_or(broker, |(_, b)| b);
            matches!(broker.rsplit_once(':'), Some((host, port))
                if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0))
        });
        if !ok {
            ctx.error(
                n.pos(),
                format!("expected broker addresses like `127.0.0.1:9092` (comma-separated, each with a port), found `{text}`"),
            );
        }
        ok.then_some(text)
    });
    let acks = match fields.get("acks") {
        None => Some(Acks::All),
        Some(n) => match n.as_str().map(str::trim) {
            Some("0") => Some(Acks::None),
            Some("1") => Some(Acks::Leader),
            Some("all" | "-1") => Some(Acks::All),
            _ => {
                ctx.error(
                    n.pos(),
                    format!("expected `acks` to be 0, 1 or all, found {}", n.describe()),
                );
                None
            }
        },
    };
    let mut producer = ProducerSettings::default();
    let mut security = SecurityDraft::default();
    // Checked against the codec once every setting is read.
    let mut level_at = None;
    // `enable.idempotence` as given, checked against acks and in-flight.
    let mut idempotence_at = None;
    if let Some(n) = fields.get("settings") {
        for (key, value) in ctx.named_map(n, "`settings`").unwrap_or_default() {
            if matches!(key.name.as_str(), "bootstrap.servers" | "acks") {
                ctx.error(
                    key.pos,
                    format!(
                        "expected `{}` as `kafka.{}`, not among `settings`",
                        key.name,
                        key.name.replace(".servers", "")
                    ),
                );
                continue;
            }
            if key.name.starts_with("ssl.")
                || key.name.starts_with("sasl.")
                || matches!(
                    key.name.as_str(),
                    "security.protocol" | "enable.ssl.certificate.verification"
                )
            {
                security.read(ctx, &key.name, key.pos, value, base_dir);
                continue;
            }
            let Some(v) = ctx.setting(value, "a setting's value (a string or number)") else {
                continue;
            };
            let number = |max: u64| v.trim().parse::<u64>().ok().filter(|&n| n <= max);
            let ok = match key.name.as_str() {
                "linger.ms" | "queue.buffering.max.ms" => number(60_000)
                    .map(|ms| producer.linger = Duration::from_millis(ms))
                    .is_some(),
                "batch.size" => number(64 << 20)
                    .filter(|&n| n > 0)
                    .map(|n| producer.batch_bytes = n as u32)
                    .is_some(),
                "max.in.flight.requests.per.connection" | "max.in.flight" => number(1000)
                    .filter(|&n| n > 0)
                    .map(|n| producer.max_in_flight = n as u32)
                    .is_some(),
                "client.id" => {
                    producer.client_id = v.clone();
                    true
                }
                "metadata.max.age.ms" => number(86_400_000)
                    .filter(|&ms| ms >= 100)
                    .map(|ms| producer.metadata_max_age = Duration::from_millis(ms))
                    .is_some(),
                "retry.backoff.ms" => number(60_000)
                    .map(|ms| producer.retry_backoff = Duration::from_millis(ms))
                    .is_some(),
                "delivery.timeout.ms" => number(86_400_000)
                    .filter(|&ms| ms >= 1)
                    .map(|ms| producer.delivery_timeout = Duration::from_millis(ms))
                    .is_some(),
                "enable.idempotence" => match v.trim() {
                    "true" | "false" => {
                        idempotence_at = Some((v.trim() == "true", value.pos()));
                        true
                    }
                    _ => false,
                },
                "compression.type" | "compression.codec" => Compression::parse(v.trim())
                    .map(|c| producer.compression = c)
                    .is_some(),
                "compression.level"
                | "compression.gzip.level"
                | "compression.zstd.level"
                | "compression.lz4.level" => v
                    .trim()
                    .parse::<i32>()
                    .ok()
                    .map(|l| {
                        level_at = Some((l, value.pos()));
                        producer.compression_level = Some(l);
                    })
                    .is_some(),
                _ => {
                    ctx.error(
                        key.pos,
                        format!(
                            "unknown producer setting `{}`: autoperf's producer takes linger.ms, batch.size, \
                             max.in.flight.requests.per.connection, client.id, metadata.max.age.ms, \
                             retry.backoff.ms, delivery.timeout.ms, compression.type, compression.level, enable.idempotence, security.protocol, ssl.* and sasl.*",
                            key.name
                        ),
                    );
                    continue;
                }
            };
            if !ok {
                let expected = match key.name.as_str() {
                    "linger.ms" | "queue.buffering.max.ms" => "milliseconds from 0 to 60000",
                    "batch.size" => "bytes from 1 to 67108864",
                    "metadata.max.age.ms" => "milliseconds from 100 to 86400000",
                    "retry.backoff.ms" => "milliseconds from 0 to 60000",
                    "delivery.timeout.ms" => "milliseconds from 1 to 86400000",
                    "compression.type" | "compression.codec" => {
                        "one of `none`, `gzip`, `snappy`, `lz4`, `zstd`"
                    }
                    n if n.starts_with("compression.") => "a whole number",
                    "enable.idempotence" => "true or false",
                    _ => "a count from 1 to 1000",
                };
                ctx.error(
                    value.pos(),
                    format!("expected `{}` to be {expected}, found `{v}`", key.name),
                );
            }
        }
    }
    if let Some((level, pos)) = level_at {
        match producer.compression.levels() {
            Some(range) if !range.contains(&level) => ctx.error(
                pos,
                format!(
                    "expected `compression.level` from {} to {} for {}, found {level}",
                    range.start(),
                    range.end(),
                    producer.compression.name()
                ),
            ),
            None => ctx.error_hint(
                pos,
                format!(
                    "`compression.level` has no effect with compression.type {}",
                    producer.compression.name()
                ),
                Some("levels apply to gzip (1-9) and zstd (1-22); lz4 and snappy have one speed here".into()),
            ),
            _ => {}
        }
    }
    // What the broker's duplicate detection needs: every replica's
    // acknowledgement, and at most the 5 batches per partition it tracks.
    let fits = acks == Some(Acks::All) && producer.max_in_flight <= 5;
    producer.idempotence = match idempotence_at {
        Some((true, pos)) if !fits && acks.is_some() => {
            ctx.error_hint(
                pos,
                format!(
                    "enable.idempotence: true needs acks: all and max.in.flight.requests.per.connection of at most 5 (here acks {} and {})",
                    acks.map_or("?", |a| a.name()),
                    producer.max_in_flight
                ),
                Some("set acks: all and at most 5 in flight, or enable.idempotence: false".into()),
            );
            false
        }
        Some((on, _)) => on,
        // Java's default: on where it fits, else quietly off.
        None => fits,
    };
    let security = security.finish(ctx, fields.pos);
    Some(KafkaTarget {
        bootstrap: bootstrap?,
        acks: acks?,
        producer,
        security: security?,
    })
}

/// The security settings as read, checked together once all are.
#[derive(Default)]
struct SecurityDraft {
    protocol: Option<(String, Pos)>,
    tls: TlsSettings,
    /// The first `ssl.*` and `sasl.*` setting given, for "has no effect".
    first_ssl: Option<(String, Pos)>,
    first_sasl: Option<(String, Pos)>,
    mechanism: Option<SaslMechanism>,
    username: Option<String>,
    password: Option<String>,
    token: Option<String>,
    failed: bool,
}

impl SecurityDraft {
    fn read(&mut self, ctx: &mut Ctx, key: &str, at: Pos, value: &Node, base_dir: &Path) {
        if key.starts_with("sasl.") {
            self.first_sasl.get_or_insert((key.to_string(), at));
        } else if key != "security.protocol" {
            self.first_ssl.get_or_insert((key.to_string(), at));
        }
        let ok = match key {
            "ssl.ca.location" => pem_file(ctx, value, base_dir, Pem::Certificate)
                .map(|p| self.tls.ca_file = Some(p))
                .is_some(),
            "ssl.certificate.location" => pem_file(ctx, value, base_dir, Pem::Certificate)
                .map(|p| self.tls.client_cert = Some(p))
                .is_some(),
            "ssl.key.location" => pem_file(ctx, value, base_dir, Pem::PrivateKey)
                .map(|p| self.tls.client_key = Some(p))
                .is_some(),
            "ssl.truststore.location" | "ssl.keystore.location" => {
                ctx.error_hint(
                    at,
                    format!("autoperf reads PEM files, not Java key stores: give `{key}`'s certificates as ssl.ca.location (and a client's as ssl.certificate.location and ssl.key.location)"),
                    Some("keytool -exportcert -rfc -keystore STORE -alias ALIAS writes one as PEM".into()),
                );
                false
            }
            _ => self.read_text(ctx, key, at, value),
        };
        self.failed |= !ok;
    }

    fn read_text(&mut self, ctx: &mut Ctx, key: &str, at: Pos, value: &Node) -> bool {
        let Some(v) = ctx.setting(value, "a setting's value (a string)") else {
            return false;
        };
        let flag = |ctx: &mut Ctx| match v.trim() {
            "true" => Some(true),
            "false" => Some(false),
            _ => {
                ctx.error(
                    value.pos(),
                    format!("expected `{key}` to be true or false, found `{v}`"),
                );
                None
            }
        };
        match key {
            "security.protocol" => {
                self.protocol = Some((v.trim().to_ascii_uppercase(), value.pos()));
                true
            }
            "enable.ssl.certificate.verification" => flag(ctx)
                .map(|verify| self.tls.insecure = !verify)
                .is_some(),
            "ssl.endpoint.identification.algorithm" => match v.trim().to_ascii_lowercase().as_str()
            {
                "https" => true,
                "" | "none" => {
                    self.tls.skip_hostname = true;
                    true
                }
                _ => {
                    ctx.error(value.pos(), format!("expected `ssl.endpoint.identification.algorithm` to be https (verify the broker's name) or none, found `{v}`"));
                    false
                }
            },
            "sasl.mechanism" | "sasl.mechanisms" => match SaslMechanism::parse(v.trim()) {
                Some(m) => {
                    self.mechanism = Some(m);
                    true
                }
                None => {
                    ctx.error(value.pos(), format!(
                        "autoperf's producer speaks sasl.mechanism PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER, not `{v}`"
                    ));
                    false
                }
            },
            "sasl.username" => {
                self.username = Some(v);
                true
            }
            "sasl.password" => {
                self.password = Some(v);
                true
            }
            "sasl.oauthbearer.token" => {
                self.token = Some(v);
                true
            }
            // Java's way: the login module's options hold the credentials.
            "sasl.jaas.config" => {
                let option = |name: &str| {
                    let re = regex::Regex::new(&format!(r#"\b{name}\s*=\s*"([^"]*)""#))
                        .expect("a fixed pattern");
                    re.captures(&v).map(|c| c[1].to_string())
                };
                match (option("username"), option("password")) {
                    (Some(u), Some(p)) => {
                        self.username.get_or_insert(u);
                        self.password.get_or_insert(p);
                        true
                    }
                    _ => {
                        ctx.error(value.pos(), "expected `sasl.jaas.config` with username=\"…\" and password=\"…\" (or give sasl.username and sasl.password)");
                        false
                    }
                }
            }
            _ => {
                ctx.error(at, format!(
                    "unknown security setting `{key}`: autoperf's producer takes security.protocol, ssl.ca.location, \
                     ssl.certificate.location, ssl.key.location, ssl.endpoint.identification.algorithm, \
                     enable.ssl.certificate.verification, sasl.mechanism, sasl.username, sasl.password, sasl.jaas.config \
                     and sasl.oauthbearer.token"
                ));
                false
            }
        }
    }

    fn finish(self, ctx: &mut Ctx, settings_at: Pos) -> Option<KafkaSecurity> {
        let (protocol, at) = self
            .protocol
            .clone()
            .unwrap_or(("PLAINTEXT".to_string(), settings_at));
        let (tls, sasl) = match protocol.as_str() {
            "PLAINTEXT" => (false, false),
            "SSL" => (true, false),
            "SASL_PLAINTEXT" => (false, true),
            "SASL_SSL" => (true, true),
            _ => {
                ctx.error(at, format!("expected `security.protocol` to be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, found `{protocol}`"));
                return None;
            }
        };
        let mut ok = !self.failed;
        let mut no_effect = |ctx: &mut Ctx, first: &Option<(String, Pos)>, needs: &str| {
            if let Some((key, pos)) = first {
                ctx.error_hint(
                    *pos,
                    format!("`{key}` has no effect with security.protocol {protocol}"),
                    Some(format!("set security.protocol: {needs}")),
                );
                ok = false;
            }
        };
        if !tls {
            no_effect(ctx, &self.first_ssl, "SSL or SASL_SSL");
        }
        if !sasl {
            no_effect(ctx, &self.first_sasl, "SASL_SSL or SASL_PLAINTEXT");
        }
        if self.tls.client_cert.is_some() != self.tls.client_key.is_some() {
            ctx.error(settings_at, "`ssl.certificate.location` and `ssl.key.location` go together: give both, or neither");
            ok = false;
        }
        let sasl = if sasl && self.mechanism == Some(SaslMechanism::OAuthBearer) {
            match self.token {
                Some(token) => Some(SaslSettings {
                    mechanism: SaslMechanism::OAuthBearer,
                    username: String::new(),
                    password: token,
                }),
                None => {
                    ctx.error_hint(
                        at,
                        format!("sasl.mechanism OAUTHBEARER needs sasl.oauthbearer.token (security.protocol {protocol})"),
                        Some("keep the token out of the file with `sasl.oauthbearer.token: ${env.KAFKA_TOKEN}`".into()),
                    );
                    return None;
                }
            }
        } else if sasl {
            match (self.mechanism, self.username, self.password) {
                (Some(mechanism), Some(username), Some(password)) => Some(SaslSettings {
                    mechanism,
                    username,
                    password,
                }),
                (mechanism, username, password) => {
                    let missing: Vec<&str> = [
                        ("sasl.mechanism", mechanism.is_none()),
                        ("sasl.username", username.is_none()),
                        ("sasl.password", password.is_none()),
                    ]
                    .into_iter()
                    .filter_map(|(k, gone)| gone.then_some(k))
                    .collect();
                    ctx.error_hint(
                        at,
                        format!("security.protocol {protocol} needs {}", missing.join(", ")),
                        Some("sasl.mechanism is PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER; keep the password out of the file with `sasl.password: ${env.KAFKA_PASSWORD}`".into()),
                    );
                    return None;
                }
            }
        } else {
            None
        };
        ok.then_some(KafkaSecurity {
            tls: tls.then_some(self.tls),
            sasl,
        })
    }
}
