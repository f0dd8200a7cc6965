#!/usr/bin/env bash
# The one test command (README and .ci/run call exactly this): installs what
# the tests need on a fresh machine, then runs every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --locked "$@"
