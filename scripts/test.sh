#!/usr/bin/env bash
# The one test command (README and .ci/run call exactly this): installs what
# the tests need on a fresh machine, then runs every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
# The HTML report test opens report.html in headless Chromium (Debian's
# package); install it only when missing.
if ! command -v chromium >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
fi
# The Kafka tests: Kafka's jars from Maven Central (cached in ~/.m2, ~10 s the
# first time) and the Python venv of the independent decoder (once). The
# tests start the broker themselves (`scripts/kafka.sh start`, idempotent);
# it outlives them, so it is stopped here whatever the outcome.
bash scripts/kafka.sh classpath >/dev/null
bash scripts/pyenv.sh
trap 'bash scripts/kafka.sh stop' EXIT
# Release mode: the profiling and capacity tests check measured costs against
# the testbed's known ones, and a debug testbed adds overhead of its own.
cargo test --workspace --release --locked "$@"
# The static binary the container image ships (deploy/Dockerfile): built,
# then the workers of the multi-host test run it while the controller is
# the test build (so the two builds also prove they speak one protocol);
# and every Kubernetes manifest validated against the schemas.
if (($# == 0)); then
    static=$(bash scripts/static-build.sh)
    AUTOPERF_WORKER_EXE="$static" cargo test --release --locked --test workers \
        three_workers_deliver
    bash scripts/k8s-validate.sh
fi
# A short fuzzing campaign of every parser that takes untrusted bytes (20 s
# each after replaying every crash ever found; bench/README.md has the
# hour-long ones). Skipped when the tests were narrowed by arguments.
if (($# == 0)); then
    bash scripts/fuzz.sh 20
fi
