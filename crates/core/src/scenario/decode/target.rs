//! `target`: an HTTP server (`base_url`, with its client's `timeout`,
//! `tls`, `cookies`, `http` version, `compression` and streams per
//! connection, the most of a body kept for checks) or a Kafka cluster (`kafka`, decoded by `kafka.rs`).

use std::path::Path;
use std::time::Duration;

use super::super::model::*;
use super::super::yaml::Node;
use super::ctx::Ctx;
use super::kafka::decode_kafka;
use super::tls::decode_tls;
use super::url::parse_base_url;

pub(crate) const TARGET_KEYS: &[&str] = &[
    "base_url",
    "compression",
    "cookies",
    "http",
    "kafka",
    "max_body",
    "streams_per_connection",
    "timeout",
    "tls",
];

pub(super) fn decode_target(ctx: &mut Ctx, node: &Node, base_dir: &Path) -> Option<Target> {
    let fields = ctx.map(node, "`target`", TARGET_KEYS)?;
    let endpoint = match (fields.get("base_url"), fields.get("kafka")) {
        (Some(_), Some(_)) => {
            let pos = fields.key("kafka").map_or(fields.pos, |k| k.pos);
            ctx.error_hint(
                pos,
                "expected one of `base_url` (an HTTP server) or `kafka` (a Kafka cluster) in `target`, found both",
                Some("one scenario drives one kind of target".into()),
            );
            None
        }
        (Some(n), None) => ctx
            .setting(n, "a base URL like `http://127.0.0.1:8080`")
            .and_then(|text| {
                parse_base_url(&text)
                    .map_err(|e| ctx.error(n.pos(), e))
                    .ok()
            })
            .map(Endpoint::Http),
        (None, Some(n)) => decode_kafka(ctx, n, base_dir).map(Endpoint::Kafka),
        (None, None) => {
            ctx.error(
                fields.pos,
                "missing required key `base_url` (or `kafka`) in `target`",
            );
            None
        }
    };
    // What only an HTTP client does, asked of a Kafka target.
    if let Some(Endpoint::Kafka(_)) = &endpoint {
        for key in [
            "tls",
            "cookies",
            "http",
            "compression",
            "streams_per_connection",
            "max_body",
        ] {
            if let Some(k) = fields.key(key) {
                ctx.error_hint(
                    k.pos,
                    format!("`{key}` is an HTTP setting; this target is a Kafka cluster"),
                    Some("remove it (Kafka client settings go under `kafka.settings`)".into()),
                );
            }
        }
    }
    let timeout = match fields.get("timeout") {
        Some(n) => ctx.duration(n).filter(|d| {
            if d.is_zero() {
                ctx.error(n.pos(), "expected a timeout above zero, found `0`");
            }
            !d.is_zero()
        }),
        None => Some(Duration::from_secs(10)),
    };
    let tls = match fields.get("tls") {
        Some(n) => {
            let tls = decode_tls(ctx, n, base_dir);
            if let Some(Endpoint::Http(base)) = &endpoint {
                if !base.tls {
                    ctx.error_hint(
                        n.pos(),
                        "`tls` settings for a plain `http://` base URL",
                        Some("write the base URL as `https://…`".into()),
                    );
                }
            }
            tls?
        }
        None => TlsSettings::default(),
    };
    let cookies = match fields.get("cookies") {
        Some(n) => match ctx.string(n, "`session`, `user` or `off`")?.as_str() {
            "session" => CookiePolicy::Session,
            "user" => CookiePolicy::User,
            "off" => CookiePolicy::Off,
            other => {
                ctx.error_hint(
                    n.pos(),
                    format!("expected `session`, `user` or `off` for `cookies`, found `{other}`"),
                    Some("session: each user's cookies go when its session ends (the default); user: kept all level; off: none".into()),
                );
                return None;
            }
        },
        None => CookiePolicy::default(),
    };
    let http = match fields.get("http") {
        Some(n) => match ctx.string(n, "`1.1`, `2` or `auto`")?.as_str() {
            "1.1" => HttpVersion::Http1,
            "2" => HttpVersion::Http2,
            "auto" => HttpVersion::Auto,
            other => {
                ctx.error_hint(
                    n.pos(),
                    format!("expected `1.1`, `2` or `auto` for `http`, found `{other}`"),
                    Some("1.1: HTTP/1.1 (the default); 2: HTTP/2 (h2 over https, h2c over http); auto: what the server offers by ALPN".into()),
                );
                return None;
            }
        },
        None => HttpVersion::default(),
    };
    let streams_per_connection = match fields.get("streams_per_connection") {
        Some(n) => {
            let streams = ctx.integer(n, 1, "a number of streams")?;
            if http == HttpVersion::Http1 {
                ctx.error_hint(
                    n.pos(),
                    "`streams_per_connection` needs HTTP/2",
                    Some("add `http: 2` (or `auto`) to `target`".into()),
                );
                return None;
            }
            u32::try_from(streams).unwrap_or(u32::MAX)
        }
        None => 1,
    };
    let compression = match fields.get("compression") {
        Some(n) => {
            match ctx.string(n, "`true` or `false`")?.as_str() {
                "true" => true,
                "false" => false,
                other => {
                    ctx.error_hint(
                    n.pos(),
                    format!("expected `true` or `false` for `compression`, found `{other}`"),
                    Some("true sends `Accept-Encoding: gzip, deflate, br` and decodes what comes".into()),
                );
                    return None;
                }
            }
        }
        None => false,
    };
    let max_body = match fields.get("max_body") {
        Some(n) => ctx.byte_size(n, 1, "a size like `4MiB`")?,
        None => super::super::model::DEFAULT_MAX_BODY as u64,
    };
    Some(Target {
        endpoint: endpoint?,
        max_body: usize::try_from(max_body).unwrap_or(usize::MAX),
        timeout: timeout?,
        tls,
        cookies,
        http,
        compression,
        streams_per_connection,
    })
}
