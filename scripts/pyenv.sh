#!/usr/bin/env bash
# The Python environment of the Kafka tests' independent decoder
# (scripts/kafka-verify.py): a venv in target/pyenv with Confluent's client
# and its Avro and schema-registry extras, from PyPI. Does nothing when the
# venv already has the pinned version, so tests may call it every time.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="$ROOT/target/pyenv"
# 2.16.1 needs a certifi newer than PyPI serves here.
REQUIREMENT="confluent-kafka[avro,schemaregistry]==2.16.0"
STAMP="$VENV/.installed"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$REQUIREMENT" ]]; then
    exit 0
fi
mkdir -p "$ROOT/target"
# Concurrent callers: one installs, the others wait for it.
exec 9>"$ROOT/target/.pyenv.lock"
flock 9
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$REQUIREMENT" ]]; then
    exit 0
fi
[[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "$REQUIREMENT" >&2
echo "$REQUIREMENT" >"$STAMP"
