//! Kafka targets, `produce` requests and Avro record templates: what
//! decodes, what it renders to (checked by apache-avro's own reader), and
//! the located errors for what does not.

use std::path::Path;
use std::time::Duration;

use apache_avro::types::Value;

use super::tests::{errors, expect, ok, Fixed};
use super::*;

fn produce(s: &Scenario, i: usize) -> &Produce {
    match &s.requests[i].action {
        Action::Produce(p) => p,
        Action::Http(_) => panic!("a produce request"),
    }
}

fn avro_bytes(value: &AvroValue) -> Vec<u8> {
    let mut out = Vec::new();
    value
        .record
        .render(&mut Fixed, &mut out, &mut Vec::new())
        .unwrap();
    out
}

#[test]
fn theodolite_example_decodes_and_renders_valid_avro() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/theodolite-kafka.yaml");
    let s = load(&path).unwrap_or_else(|e| panic!("{e}"));
    let Endpoint::Kafka(kafka) = &s.target.endpoint else {
        panic!("a Kafka target")
    };
    assert_eq!(kafka.bootstrap, "127.0.0.1:19092");
    assert_eq!(kafka.acks, Acks::All);
    assert_eq!(kafka.producer.linger, Duration::from_millis(5));
    assert_eq!(kafka.producer, ProducerSettings::default());
    assert_eq!(
        s.feeders[0].source,
        FeederSource::Range { from: 0, to: 9999 }
    );
    assert_eq!(s.feeders[0].rows.len(), 10_000);
    assert_eq!(s.feeders[0].rows[9999], ["9999"]);
    assert_eq!(s.arrivals.as_ref().unwrap().stages[0].rate_per_s, 10_000.0);

    let p = produce(&s, 0);
    assert_eq!(p.topic, "input");
    // `Fixed` binds column 0 of every feeder to "Kevin Bacon", now to
    // 1.7e12 ms, and unit() to 0.25.
    assert_eq!(render(p.key.as_ref().unwrap()), "s_Kevin Bacon");
    let RecordValue::Avro(avro) = &p.value else {
        panic!("an Avro value")
    };
    assert_eq!(
        avro.framing,
        AvroFraming::Registry {
            url: decode::parse_base_url("http://127.0.0.1:18081").unwrap(),
            subject: "input-value".into()
        }
    );
    let schema = apache_avro::Schema::parse_str(&avro.schema_json).unwrap();
    let bytes = avro_bytes(avro);
    let value = decode(&schema, &mut &bytes[..], None).unwrap();
    assert_eq!(
        value,
        Value::Record(vec![
            ("identifier".into(), Value::String("s_Kevin Bacon".into())),
            ("timestamp".into(), Value::Long(1_700_000_000_000)),
            ("valueInW".into(), Value::Double(25.0)),
        ])
    );
}

/// One datum with apache-avro's reader; all of `bytes` must be used.
fn decode(schema: &apache_avro::Schema, bytes: &mut &[u8], _: Option<()>) -> Result<Value, String> {
    #[allow(deprecated)] // its replacement's builder is more than a test needs
    let value = apache_avro::from_avro_datum(schema, bytes, None).map_err(|e| e.to_string())?;
    Ok(value)
}

fn render(t: &Template) -> String {
    super::tests::render(t)
}

const KAFKA: &str = "target: {kafka: {bootstrap: '127.0.0.1:9092'}}\n";

#[test]
fn every_avro_shape_matches_apache_avros_reader() {
    let s = ok(&format!(
        r#"{KAFKA}requests:
  r:
    produce:
      topic: t
      value:
        avro:
          schema_id: 3
          schema:
            type: record
            name: R
            fields:
              - {{name: b, type: boolean}}
              - {{name: i, type: int}}
              - {{name: f, type: float}}
              - {{name: by, type: bytes}}
              - {{name: e, type: {{type: enum, name: E, symbols: [A, B]}}}}
              - {{name: fx, type: {{type: fixed, name: F, size: 2}}}}
              - {{name: a, type: {{type: array, items: long}}}}
              - {{name: m, type: {{type: map, values: string}}}}
              - {{name: u, type: [null, long, string]}}
              - {{name: un, type: [null, string]}}
              - {{name: n, type: {{type: record, name: N, fields: [{{name: x, type: E}}]}}}}
              - {{name: ts, type: {{type: long, logicalType: timestamp-millis}}}}
          record:
            i: "${{random(-3, 9)}}"
            b: true
            f: 1.5
            by: "x${{random(1,1)}}"
            e: B
            fx: ab
            a: [1, "${{random(2,5)}}", -3]
            m: {{k: v, "k2": "${{now_ms()}}"}}
            u: text
            un: ~
            n: {{x: A}}
            ts: "${{now_ms()}}"
"#
    ));
    let RecordValue::Avro(avro) = &produce(&s, 0).value else {
        panic!()
    };
    assert_eq!(avro.framing, AvroFraming::SchemaId(3));
    let schema = apache_avro::Schema::parse_str(&avro.schema_json).unwrap();
    let bytes = avro_bytes(avro);
    let mut reader = &bytes[..];
    let value = decode(&schema, &mut reader, None).unwrap();
    assert!(reader.is_empty());
    let Value::Record(fields) = value else {
        panic!()
    };
    let got: Vec<(&str, &Value)> = fields.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let m = Value::Map(
        [
            ("k".to_string(), Value::String("v".into())),
            ("k2".to_string(), Value::String("1700000000000".into())),
        ]
        .into(),
    );
    assert_eq!(
        got,
        [
            ("b", &Value::Boolean(true)),
            ("i", &Value::Int(-3)),
            ("f", &Value::Float(1.5)),
            ("by", &Value::Bytes(b"x1".to_vec())),
            ("e", &Value::Enum(1, "B".into())),
            ("fx", &Value::Fixed(2, b"ab".to_vec())),
            (
                "a",
                &Value::Array(vec![Value::Long(1), Value::Long(2), Value::Long(-3)])
            ),
            ("m", &m),
            (
                "u",
                &Value::Union(2, Box::new(Value::String("text".into())))
            ),
            ("un", &Value::Union(0, Box::new(Value::Null))),
            (
                "n",
                &Value::Record(vec![("x".into(), Value::Enum(0, "A".into()))])
            ),
            ("ts", &Value::TimestampMillis(1_700_000_000_000)),
        ]
    );
}

#[test]
fn json_and_raw_values_and_keyless_records() {
    let s = ok(&format!(
        "{KAFKA}requests:\n  j:\n    produce:\n      topic: t\n      value:\n        json:\n          id: 's_${{random(1,1)}}'\n          ts: ${{now_ms()}}\n          w: ${{random(0.0, 10.0)}}\n  r: {{produce: {{topic: t, key: k, value: {{raw: 'v ${{random(5,5)}}'}}}}}}\nsession: {{start: j, transitions: {{j: {{r: 1}}}}}}\n"
    ));
    let j = produce(&s, 0);
    assert!(j.key.is_none());
    let RecordValue::Json(t) = &j.value else {
        panic!()
    };
    assert_eq!(render(t), r#"{"id":"s_1","ts":1700000000000,"w":2.5}"#);
    let RecordValue::Raw(t) = &produce(&s, 1).value else {
        panic!()
    };
    assert_eq!(render(t), "v 5");
}

#[test]
fn target_and_request_kinds_must_agree() {
    expect(
        "target: {base_url: 'http://h', kafka: {bootstrap: 'h:1'}}\nrequests: {a: {path: /}}\n",
        "found both",
        1,
        32,
    );
    let d = expect(
        &format!("{KAFKA}requests:\n  a: {{path: /}}\n"),
        "request `a` is an HTTP request, but the target is Kafka",
        3,
        3,
    );
    assert!(d.hint.unwrap().contains("produce"));
    expect(
        "target: {base_url: 'http://h'}\nrequests:\n  a: {produce: {topic: t, value: {raw: x}}}\n",
        "request `a` produces to Kafka, but the target is an HTTP server",
        3,
        7,
    );
    expect(
        &format!("{KAFKA}requests:\n  a: {{produce: {{topic: t, value: {{raw: x}}}}, path: /}}\n"),
        "expected only `produce` in request `a`",
        3,
        45,
    );
}

#[test]
fn producer_settings_decode_and_unknown_ones_are_named() {
    let text = "target:\n  kafka: {bootstrap: 'h:1', settings: {linger.ms: 0, batch.size: 16384, max.in.flight: 20, client.id: x, metadata.max.age.ms: 1000, retry.backoff.ms: 250, delivery.timeout.ms: 30000}}\nrequests: {a: {produce: {topic: t, value: {raw: x}}}}\n";
    let s = ok(text);
    let Endpoint::Kafka(kafka) = &s.target.endpoint else {
        panic!("a Kafka target")
    };
    let expected = ProducerSettings {
        linger: Duration::ZERO,
        batch_bytes: 16384,
        max_in_flight: 20,
        client_id: "x".to_string(),
        metadata_max_age: Duration::from_secs(1),
        compression: Compression::None,
        compression_level: None,
        // 20 in flight: more than the broker's duplicate detection tracks.
        idempotence: false,
        retry_backoff: Duration::from_millis(250),
        delivery_timeout: Duration::from_secs(30),
    };
    assert_eq!(kafka.producer, expected);
    let zstd = ok("target:\n  kafka: {bootstrap: 'h:1', settings: {compression.type: zstd, compression.level: 9}}\nrequests: {a: {produce: {topic: t, value: {raw: x}}}}\n");
    let Endpoint::Kafka(kafka) = &zstd.target.endpoint else {
        panic!("a Kafka target")
    };
    assert_eq!(
        (kafka.producer.compression, kafka.producer.compression_level),
        (Compression::Zstd, Some(9))
    );
    let text = "target:\n  kafka: {bootstrap: 'h:1', settings: {compression.type: gzip, compression.level: 12}}\nrequests: {a: {produce: {topic: t, value: {raw: x}}}}\n";
    expect(
        text,
        "expected `compression.level` from 1 to 9 for gzip, found 12",
        2,
        83,
    );
    let text = "target:\n  kafka: {bootstrap: 'h:1', settings: {compression.type: lz4, compression.level: 3}}\nrequests: {a: {produce: {topic: t, value: {raw: x}}}}\n";
    expect(
        text,
        "`compression.level` has no effect with compression.type lz4",
        2,
        82,
    );
    let text = "target:\n  kafka: {bootstrap: 'h:1', settings: {queue.buffering.max.kbytes: 5, linger.ms: soon, compression.type: brotli}}\nrequests: {a: {produce: {topic: t, value: {raw: x}}}}\n";
    expect(
        text,
        "unknown producer setting `queue.buffering.max.kbytes`",
        2,
        40,
    );
    expect(text, "expected `linger.ms` to be milliseconds", 2, 82);
    expect(
        text,
        "expected `compression.type` to be one of `none`, `gzip`",
        2,
        106,
    );
}

#[test]
fn kafka_settings_errors() {
    let text = "target:\n  kafka: {bootstrap: 'nohost', acks: 2, settings: {acks: 1}, linger: 5}\nrequests: {a: {produce: {topic: 'bad topic', value: {raw: x}}}}\n";
    expect(text, "expected broker addresses like", 2, 22);
    expect(text, "expected `acks` to be 0, 1 or all", 2, 38);
    expect(text, "expected `acks` as `kafka.acks`", 2, 52);
    let d = expect(text, "unknown key `linger` in `kafka`", 2, 62);
    assert!(d.hint.unwrap().contains("expected one of"));
    expect(text, "expected a topic name", 3, 33);
}

#[test]
fn http_settings_on_a_kafka_target_are_named() {
    let text = "target:\n  kafka: {bootstrap: '127.0.0.1:9092'}\n  http: 2\n  compression: true\nrequests: {a: {produce: {topic: t, value: {raw: x}}}}\n";
    let d = expect(
        text,
        "`http` is an HTTP setting; this target is a Kafka cluster",
        3,
        3,
    );
    assert!(d.hint.unwrap().contains("kafka.settings"));
    expect(text, "`compression` is an HTTP setting", 4, 3);
}

#[test]
fn avro_record_errors_are_located_and_suggest_fields() {
    let text = format!(
        r#"{KAFKA}requests:
  r:
    produce:
      topic: t
      value:
        avro:
          schema: {{type: record, name: R, fields: [{{name: identifier, type: string}}, {{name: timestamp, type: long}}, {{name: w, type: double}}]}}
          record:
            identifer: x
            timestamp: soon
            w: "${{nope}}"
"#
    );
    let d = expect(
        &text,
        "unknown field `identifer` in Avro record `R`",
        10,
        13,
    );
    assert_eq!(d.hint.as_deref(), Some("did you mean `identifier`?"));
    expect(
        &text,
        "missing field `identifier` of Avro record `R`",
        10,
        13,
    );
    expect(
        &text,
        "expected an integer (Avro long), found `soon`",
        11,
        24,
    );
    expect(&text, "unknown variable `nope`", 12, 17);

    let bad_schema = format!(
        "{KAFKA}requests:\n  r: {{produce: {{topic: t, value: {{avro: {{schema: {{type: record, name: R}}, record: {{}}}}}}}}}}\n"
    );
    expect(&bad_schema, "expected a valid Avro schema", 3, 50);
    let both = format!(
        "{KAFKA}requests:\n  r: {{produce: {{topic: t, value: {{avro: {{schema: string, schema_id: 1, registry: {{url: 'http://h'}}, record: x}}}}}}}}\n"
    );
    expect(&both, "expected one of `registry` or `schema_id`", 3, 58);
    let missing = format!(
        "{KAFKA}requests:\n  r: {{produce: {{topic: t, value: {{avro: {{schema_file: nowhere.avsc, record: x}}}}}}}}\n"
    );
    expect(&missing, "cannot read Avro schema", 3, 55);
}

#[test]
fn range_feeders() {
    let s = ok(&format!(
        "{KAFKA}data: {{s: {{range: [-2, 2]}}}}\nrequests: {{a: {{produce: {{topic: t, key: '${{s.n}}', value: {{raw: x}}}}}}}}\n"
    ));
    assert_eq!(s.feeders[0].columns, ["n"]);
    let rows: Vec<&str> = s.feeders[0].rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(rows, ["-2", "-1", "0", "1", "2"]);
    let all = errors(&format!(
        "{KAFKA}data: {{a: {{range: [3, 1]}}, b: {{range: [0, 5000000]}}, c: {{}}}}\nrequests: {{a: {{produce: {{topic: t, value: {{raw: x}}}}}}}}\n"
    ));
    let messages: Vec<&str> = all.iter().map(|d| d.message.as_str()).collect();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("expected `range: [from, to]`")),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("at most 1000000 values")),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("missing required key `csv` (or `range`)")),
        "{messages:?}"
    );
}

#[test]
fn security_settings_decode_and_misfits_are_named() {
    let dir = std::env::temp_dir().join(format!("autoperf-kafka-sec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(
        &ca,
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let ca = ca.display();
    // The column of `what` on the settings' line.
    let col = |text: &str, what: &str| text.lines().nth(1).unwrap().find(what).unwrap() + 1;
    let kafka = |settings: &str| {
        format!("target:\n  kafka: {{bootstrap: 'h:1', settings: {{{settings}}}}}\nrequests: {{a: {{produce: {{topic: t, value: {{raw: x}}}}}}}}\n")
    };
    let s = ok(&kafka(&format!(
        "security.protocol: sasl_ssl, ssl.ca.location: '{ca}', ssl.endpoint.identification.algorithm: '', \
         sasl.mechanism: SCRAM-SHA-512, sasl.jaas.config: 'org.apache.kafka.common.security.scram.ScramLoginModule required username=\"u\" password=\"p w\";'"
    )));
    let Endpoint::Kafka(k) = &s.target.endpoint else {
        panic!("a Kafka target")
    };
    let tls = k.security.tls.as_ref().expect("TLS on");
    assert!(tls.skip_hostname && !tls.insecure && tls.ca_file.is_some());
    let sasl = k.security.sasl.as_ref().expect("SASL on");
    assert_eq!(
        (
            sasl.mechanism,
            sasl.username.as_str(),
            sasl.password.as_str()
        ),
        (SaslMechanism::ScramSha512, "u", "p w")
    );
    assert!(
        !format!("{sasl:?}").contains("p w"),
        "the password stays out of Debug"
    );
    // Plaintext by default: nothing secured.
    let s = ok(&kafka("linger.ms: 1"));
    let Endpoint::Kafka(k) = &s.target.endpoint else {
        panic!("a Kafka target")
    };
    assert_eq!(k.security, KafkaSecurity::default());

    // Each misfit: the settings, the message, and where it points.
    let misfits = [
        ("sasl.mechanism: PLAIN, sasl.username: u, sasl.password: p".to_string(),
         "`sasl.mechanism` has no effect with security.protocol PLAINTEXT", "sasl.mechanism:"),
        (format!("security.protocol: SASL_PLAINTEXT, ssl.ca.location: '{ca}', sasl.mechanism: PLAIN, sasl.username: u, sasl.password: p"),
         "`ssl.ca.location` has no effect with security.protocol SASL_PLAINTEXT", "ssl.ca.location:"),
        ("security.protocol: SASL_SSL, sasl.username: u".to_string(),
         "security.protocol SASL_SSL needs sasl.mechanism, sasl.password", "SASL_SSL"),
        ("security.protocol: SASL_SSL, sasl.mechanism: GSSAPI, sasl.username: u, sasl.password: p".to_string(),
         "speaks sasl.mechanism PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER, not `GSSAPI`", "GSSAPI"),
        ("security.protocol: SASL_SSL, sasl.mechanism: OAUTHBEARER".to_string(),
         "sasl.mechanism OAUTHBEARER needs sasl.oauthbearer.token", "SASL_SSL"),
        ("security.protocol: SSL, ssl.truststore.location: trust.jks".to_string(),
         "autoperf reads PEM files, not Java key stores", "ssl.truststore.location"),
        ("security.protocol: TLS".to_string(),
         "expected `security.protocol` to be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, found `TLS`", "TLS"),
        ("security.protocol: SSL, ssl.ca.location: missing.pem".to_string(), "missing.pem", "missing.pem"),
    ];
    for (settings, message, at) in &misfits {
        let text = kafka(settings);
        expect(&text, message, 2, col(&text, at));
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn idempotence_is_on_where_it_fits_and_a_misfit_is_named() {
    let kafka = |acks: &str, settings: &str| {
        format!("target:\n  kafka: {{bootstrap: 'h:1', acks: {acks}, settings: {{{settings}}}}}\nrequests: {{a: {{produce: {{topic: t, value: {{raw: x}}}}}}}}\n")
    };
    let idempotent = |text: &str| match &ok(text).target.endpoint {
        Endpoint::Kafka(k) => k.producer.idempotence,
        _ => panic!("a Kafka target"),
    };
    assert!(idempotent(&kafka("all", "linger.ms: 1")), "Java's default");
    assert!(
        !idempotent(&kafka("1", "linger.ms: 1")),
        "quietly off with acks 1"
    );
    assert!(
        !idempotent(&kafka("all", "max.in.flight: 6")),
        "quietly off past 5 in flight"
    );
    assert!(!idempotent(&kafka("all", "enable.idempotence: false")));
    let text = kafka("1", "enable.idempotence: true");
    let col = text.lines().nth(1).unwrap().find("true").unwrap() + 1;
    expect(&text, "enable.idempotence: true needs acks: all and max.in.flight.requests.per.connection of at most 5 (here acks 1 and 5)", 2, col);
}
