#!/usr/bin/env bash
# Builds autoperf as one static binary (x86_64-unknown-linux-musl): what the
# container image (deploy/Dockerfile) copies, and what runs on a load host
# that has no Rust toolchain and whatever libc. Installs the musl target
# (rustup) and musl-gcc (Debian's musl-tools, for the C parts of ring and
# zstd) when missing. Prints the binary's path.
#
#   bash scripts/static-build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=x86_64-unknown-linux-musl
if ! rustup target list --installed | grep -qx "$TARGET"; then
    rustup target add "$TARGET" >&2
fi
if ! command -v musl-gcc >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends musl-tools >&2
fi
export CC_x86_64_unknown_linux_musl=musl-gcc
cargo build --release --locked --bin autoperf --target "$TARGET" >&2
BIN="$(cd "${CARGO_TARGET_DIR:-target}" && pwd)/$TARGET/release/autoperf"
# Static, or it is no use in a `FROM distroless/static` image: no program
# interpreter and no shared library needed. Judged from the ELF headers, not
# by ldd, whose exit code differs between glibc versions: some exit 0 on a
# static-pie binary and print "statically linked".
if readelf -lW "$BIN" | grep -q 'program interpreter' || readelf -dW "$BIN" | grep -q '(NEEDED)'; then
    echo "static-build: $BIN is dynamically linked:" >&2
    readelf -lW "$BIN" | grep 'program interpreter' >&2 || true
    readelf -dW "$BIN" | grep '(NEEDED)' >&2 || true
    exit 1
fi
echo "$BIN"
