//! The functions a template may call, each with its arity and usage (what
//! `check` prints), how its literal settings are read at load time, and
//! what it computes per rendering. `random` and `now_ms` are leaves of the
//! template's fast path (`Dynamic`), not here.

use std::io::Write as _;
use std::time::{Duration, SystemTime};

use base64::Engine as _;

use super::{escape, BadValue, Bindings, Escape};

/// A function with its load-time settings resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Func {
    Uuid,
    Base64 { url: bool },
    UrlEncode,
    Sha256,
    HmacSha256 { base64: bool },
    Now { format: TimeFormat, offset_ms: i64 },
    RandomString,
    Pick,
    Lower,
    Upper,
    Json,
    Concat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimeFormat {
    Rfc3339,
    Rfc3339Ms,
    EpochS,
    EpochMs,
}

/// A function's arguments that are string literals, in order (None where
/// an argument is computed).
type Settings<'a> = [Option<&'a [u8]>];

pub(crate) struct Spec {
    pub name: &'static str,
    pub min: usize,
    pub max: usize,
    pub usage: &'static str,
    /// The function, from its literal arguments.
    pub resolve: fn(&Settings) -> Result<Func, String>,
}

/// The largest offset of `now`: 100 years.
const MAX_OFFSET_MS: i64 = 100 * 31_557_600_000; // humantime's year: 365.25 days

/// The longest `random_string`, so a typo cannot fill memory.
const MAX_RANDOM_STRING: i64 = 65_536;

pub(crate) const SPECS: &[Spec] = &[
    Spec {
        name: "uuid",
        min: 0,
        max: 0,
        usage: "a random version-4 UUID",
        resolve: |_| Ok(Func::Uuid),
    },
    Spec {
        name: "base64",
        min: 1,
        max: 1,
        usage: "base64(text), padded",
        resolve: |_| Ok(Func::Base64 { url: false }),
    },
    Spec {
        name: "base64url",
        min: 1,
        max: 1,
        usage: "base64url(text), URL-safe, unpadded",
        resolve: |_| Ok(Func::Base64 { url: true }),
    },
    Spec {
        name: "urlencode",
        min: 1,
        max: 1,
        usage: "urlencode(text), all but A-Z a-z 0-9 -._~ percent-encoded",
        resolve: |_| Ok(Func::UrlEncode),
    },
    Spec {
        name: "sha256",
        min: 1,
        max: 1,
        usage: "sha256(text), lowercase hex",
        resolve: |_| Ok(Func::Sha256),
    },
    Spec {
        name: "hmac_sha256",
        min: 2,
        max: 3,
        usage: r#"hmac_sha256(key, text) in lowercase hex, or hmac_sha256(key, text, "base64")"#,
        resolve: hmac,
    },
    Spec {
        name: "now",
        min: 0,
        max: 2,
        usage: r#"now() in RFC 3339, now("epoch_s" | "epoch_ms" | "rfc3339_ms"), with an offset: now("+1d"), now("epoch_s", "-30m")"#,
        resolve: now,
    },
    Spec {
        name: "random_string",
        min: 1,
        max: 1,
        usage: "random_string(n): n letters and digits",
        resolve: |_| Ok(Func::RandomString),
    },
    Spec {
        name: "pick",
        min: 1,
        max: 64,
        usage: "pick(a, b, …): one of its arguments, each as likely",
        resolve: |_| Ok(Func::Pick),
    },
    Spec {
        name: "lower",
        min: 1,
        max: 1,
        usage: "lower(text)",
        resolve: |_| Ok(Func::Lower),
    },
    Spec {
        name: "upper",
        min: 1,
        max: 1,
        usage: "upper(text)",
        resolve: |_| Ok(Func::Upper),
    },
    Spec {
        name: "json",
        min: 1,
        max: 1,
        usage: "json(text): escaped for the inside of a JSON string",
        resolve: |_| Ok(Func::Json),
    },
    Spec {
        name: "concat",
        min: 1,
        max: 64,
        usage: "concat(a, b, …): the values one after the other",
        resolve: |_| Ok(Func::Concat),
    },
];

/// The functions' names, in the order of `SPECS`.
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    SPECS.iter().map(|s| s.name)
}

pub(crate) fn lookup(name: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.name == name)
}

fn hmac(settings: &Settings) -> Result<Func, String> {
    match settings.get(2) {
        None => Ok(Func::HmacSha256 { base64: false }),
        Some(Some(b"hex")) => Ok(Func::HmacSha256 { base64: false }),
        Some(Some(b"base64")) => Ok(Func::HmacSha256 { base64: true }),
        Some(_) => Err(r#"the third argument of `hmac_sha256` is "hex" or "base64""#.into()),
    }
}

fn now(settings: &Settings) -> Result<Func, String> {
    let mut format = None;
    let mut offset_ms = None;
    for setting in settings {
        let Some(text) = setting.and_then(|s| std::str::from_utf8(s).ok()) else {
            return Err("`now`'s arguments are quoted settings, not values".into());
        };
        if let Some(sign) = text
            .strip_prefix(['+', '-'])
            .map(|rest| (text.starts_with('-'), rest))
        {
            let (negative, rest) = sign;
            let d = humantime::parse_duration(rest.trim())
                .map_err(|e| format!("offset `{text}`: {e} (write `+1d`, `-30m`, `+1h 30m`)"))?;
            // Dates past year 9999 have no RFC 3339 form.
            let ms = i64::try_from(d.as_millis())
                .ok()
                .filter(|&ms| ms <= MAX_OFFSET_MS)
                .ok_or_else(|| format!("offset `{text}` is more than 100 years"))?;
            if offset_ms.replace(if negative { -ms } else { ms }).is_some() {
                return Err("`now` takes one offset".into());
            }
            continue;
        }
        let f = match text {
            "rfc3339" => TimeFormat::Rfc3339,
            "rfc3339_ms" => TimeFormat::Rfc3339Ms,
            "epoch_s" => TimeFormat::EpochS,
            "epoch_ms" => TimeFormat::EpochMs,
            other => {
                return Err(format!(
                    "unknown time format `{other}` (known: rfc3339, rfc3339_ms, epoch_s, epoch_ms; an offset starts with + or -)"
                ))
            }
        };
        if format.replace(f).is_some() {
            return Err("`now` takes one format".into());
        }
    }
    Ok(Func::Now {
        format: format.unwrap_or(TimeFormat::Rfc3339),
        offset_ms: offset_ms.unwrap_or(0),
    })
}

impl Func {
    /// How many of the `given` arguments are evaluated per rendering (the
    /// rest were settings, read at load time).
    pub(crate) fn evaluated_arguments(self, given: usize) -> usize {
        match self {
            Func::Now { .. } => 0,
            Func::HmacSha256 { .. } => 2,
            _ => given,
        }
    }
}

/// Appends `f(args)` to `out`, its arguments evaluated.
pub(crate) fn apply(
    f: Func,
    args: &[Vec<u8>],
    b: &mut impl Bindings,
    out: &mut Vec<u8>,
) -> Result<(), BadValue> {
    match f {
        Func::Uuid => {
            let hi = b.random(i64::MIN, i64::MAX) as u64;
            let lo = b.random(i64::MIN, i64::MAX) as u64;
            // Version 4, variant 10 (RFC 9562, 5.4).
            let hi = (hi & !0xF000) | 0x4000;
            let lo = (lo & !(0b11 << 62)) | (0b10 << 62);
            let _ = write!(
                out,
                "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                hi >> 32,
                (hi >> 16) & 0xFFFF,
                hi & 0xFFFF,
                lo >> 48,
                lo & 0xFFFF_FFFF_FFFF
            );
        }
        Func::Base64 { url } => {
            let v = &args[0];
            let engine = match url {
                false => base64::engine::general_purpose::STANDARD,
                true => base64::engine::general_purpose::URL_SAFE_NO_PAD,
            };
            out.extend_from_slice(engine.encode(v).as_bytes());
        }
        Func::UrlEncode => escape(Escape::Path, &args[0], out),
        Func::Json => escape(Escape::Json, &args[0], out),
        Func::Sha256 => hex(
            ring::digest::digest(&ring::digest::SHA256, &args[0]).as_ref(),
            out,
        ),
        Func::HmacSha256 { base64 } => {
            let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &args[0]);
            let tag = ring::hmac::sign(&key, &args[1]);
            match base64 {
                false => hex(tag.as_ref(), out),
                true => out.extend_from_slice(
                    base64::engine::general_purpose::STANDARD
                        .encode(tag.as_ref())
                        .as_bytes(),
                ),
            }
        }
        Func::Now { format, offset_ms } => {
            let ms = b.now_ms().saturating_add(offset_ms);
            let at = || SystemTime::UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
            let _ = match format {
                TimeFormat::EpochMs => write!(out, "{ms}"),
                TimeFormat::EpochS => write!(out, "{}", ms.div_euclid(1000)),
                TimeFormat::Rfc3339 => write!(out, "{}", humantime::format_rfc3339_seconds(at())),
                TimeFormat::Rfc3339Ms => write!(out, "{}", humantime::format_rfc3339_millis(at())),
            };
        }
        Func::RandomString => {
            const ALPHABET: &[u8] =
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
            let n = integer_of(&args[0])?;
            if !(0..=MAX_RANDOM_STRING).contains(&n) {
                return Err(BadValue);
            }
            for _ in 0..n {
                out.push(ALPHABET[b.random(0, ALPHABET.len() as i64 - 1) as usize]);
            }
        }
        Func::Pick => {
            let i = b.random(0, args.len() as i64 - 1) as usize;
            out.extend_from_slice(&args[i]);
        }
        Func::Lower | Func::Upper => {
            let v = &args[0];
            let s = String::from_utf8_lossy(v);
            let changed = if f == Func::Lower {
                s.to_lowercase()
            } else {
                s.to_uppercase()
            };
            out.extend_from_slice(changed.as_bytes());
        }
        Func::Concat => {
            for a in args {
                out.extend_from_slice(a);
            }
        }
    }
    Ok(())
}

/// A value as an integer: empty (a variable not yet bound) is 0; text that
/// is not an integer is a `BadValue`.
pub(crate) fn integer_of(text: &[u8]) -> Result<i64, BadValue> {
    let text = std::str::from_utf8(text).map_err(|_| BadValue)?.trim();
    if text.is_empty() {
        return Ok(0);
    }
    text.parse().map_err(|_| BadValue)
}

fn hex(bytes: &[u8], out: &mut Vec<u8>) {
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
}
