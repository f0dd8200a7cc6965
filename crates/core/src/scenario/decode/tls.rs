//! `target.tls` and the PEM files it names (read now, so a missing or
//! wrong one is reported at its place); `kafka.rs` reads its `ssl.*`
//! files the same way.

use std::path::Path;

use super::super::files;
use super::super::model::{PemFile, TlsSettings};
use super::super::yaml::Node;
use super::ctx::Ctx;

pub(crate) const TLS_KEYS: &[&str] = &[
    "ca_file",
    "client_cert",
    "client_key",
    "insecure",
    "server_name",
];

/// What a PEM file must hold.
#[derive(Clone, Copy)]
pub(super) enum Pem {
    Certificate,
    PrivateKey,
}

/// The PEM file named by `n` (relative to the scenario), read now so
/// that a missing or wrong one is reported at its place, and kept.
pub(super) fn pem_file(ctx: &mut Ctx, n: &Node, base_dir: &Path, kind: Pem) -> Option<PemFile> {
    let (marker, what) = match kind {
        Pem::Certificate => ("-----BEGIN CERTIFICATE-----", "certificate"),
        Pem::PrivateKey => ("PRIVATE KEY-----", "private key"),
    };
    let name = ctx.setting(n, "a file path")?;
    let path = base_dir.join(&name);
    let read = files::read_bounded(&path, files::SMALL_FILE_LIMIT, what);
    match read {
        Ok(pem) if String::from_utf8_lossy(&pem).contains(marker) => Some(PemFile { path, pem }),
        Ok(_) => {
            ctx.error(
                n.pos(),
                format!("`{name}` holds no {what} (expected PEM text with `{marker}`)"),
            );
            None
        }
        Err(e) => {
            ctx.error(n.pos(), e);
            None
        }
    }
}

/// `tls: {ca_file, insecure, server_name, client_cert, client_key}`; files
/// relative to the scenario, read now so a missing one is reported here.
pub(super) fn decode_tls(ctx: &mut Ctx, node: &Node, base_dir: &Path) -> Option<TlsSettings> {
    let fields = ctx.map(node, "`tls`", TLS_KEYS)?;
    let mut ok = true;
    let mut pem = |ctx: &mut Ctx, key: &str, kind: Pem| {
        let path = pem_file(ctx, fields.get(key)?, base_dir, kind);
        ok &= path.is_some();
        path
    };
    let ca_file = pem(ctx, "ca_file", Pem::Certificate);
    let client_cert = pem(ctx, "client_cert", Pem::Certificate);
    let client_key = pem(ctx, "client_key", Pem::PrivateKey);
    let insecure = match fields.get("insecure") {
        Some(n) => match n {
            Node::Scalar { value, .. } if value == "true" => true,
            Node::Scalar { value, .. } if value == "false" => false,
            other => {
                ctx.error(other.pos(), "expected `true` or `false` for `insecure`");
                return None;
            }
        },
        None => false,
    };
    let server_name = fields
        .get("server_name")
        .and_then(|n| ctx.setting(n, "a host name"));
    if client_cert.is_some() != client_key.is_some() {
        ctx.error(
            fields.pos,
            "`client_cert` and `client_key` go together: give both, or neither",
        );
        return None;
    }
    ok.then_some(TlsSettings {
        ca_file,
        insecure,
        server_name,
        client_cert,
        client_key,
        skip_hostname: false,
    })
}
