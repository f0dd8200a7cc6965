#!/usr/bin/env bash
# Coverage-guided fuzzing of the parsers that take untrusted bytes, with
# libFuzzer on stable Rust (the sanitizer-coverage flags cargo-fuzz passes,
# without its nightly-only sanitizers), targets in fuzz/fuzz_targets/.
#
#   bash scripts/fuzz.sh                 # every target, 20 s each (CI: `fuzz.sh 7`)
#   bash scripts/fuzz.sh 3600 template   # one target for an hour
#   bash scripts/fuzz.sh --build-only    # only build them (scripts/test.sh, during the tests)
#
# Targets fuzz side by side, one per core (FUZZ_JOBS, default nproc): each
# is single-threaded.
#
# Each target first replays its regressions (fuzz/regressions/TARGET: every
# crash ever found, kept), then fuzzes from the seeds (fuzz/seeds/TARGET and
# the examples) plus the corpus it grew before (fuzz/corpus/TARGET, not
# committed). A crash stops the script with exit 1, the input saved under
# fuzz/artifacts/TARGET/ and the command that reproduces it.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_ONLY=0
if [[ ${1:-} == --build-only ]]; then
    BUILD_ONLY=1
    shift
fi
SECONDS_EACH=${1:-20}
shift || true
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(scenario http1_response kafka_response template agent_request import
    worker_protocol run_record)

TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
# --target keeps the flags off build scripts and proc macros (the host build).
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
cargo build --manifest-path fuzz/Cargo.toml --release --locked --target "$TRIPLE" --quiet \
    $(printf -- '--bin %s ' "${TARGETS[@]}")
BIN=fuzz/target/$TRIPLE/release
((BUILD_ONLY)) && exit 0

max_len() {
    case $1 in
        scenario | worker_protocol) echo 16384 ;;
        agent_request) echo 4096 ;;
        *) echo 65536 ;;
    esac
}

# A target's log without what its own server prints for each input it
# turns away (the worker: a line each, 400 MB an hour).
quiet() {
    case $1 in
        worker_protocol) grep -av '^worker fuzz: controller ' ;;
        *) cat ;;
    esac
}

campaign() {
    local t=$1
    corpus=fuzz/corpus/$t artifacts=fuzz/artifacts/$t
    mkdir -p "$corpus" "$artifacts" "fuzz/seeds/$t"
    seeds=("fuzz/seeds/$t")
    [[ $t == scenario ]] && seeds+=(examples)
    dict=()
    [[ -f fuzz/dict/$t.dict ]] && dict=(-dict="fuzz/dict/$t.dict")
    shopt -s nullglob
    regressions=(fuzz/regressions/"$t"/*)
    shopt -u nullglob
    if ((${#regressions[@]})); then
        "$BIN/$t" -runs=1 "${regressions[@]}" >"$artifacts/regressions.log" 2>&1 || {
            echo "fuzz $t: a regression input crashes again:" >&2
            tail -30 "$artifacts/regressions.log" >&2
            exit 1
        }
    fi
    log=$artifacts/campaign.log
    if ! "$BIN/$t" "$corpus" "${seeds[@]}" "${dict[@]}" -max_total_time="$SECONDS_EACH" \
        -max_len="$(max_len "$t")" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" 2>&1 | quiet "$t" >"$log"; then
        echo "fuzz $t: CRASH after $(grep -c '' "$log") log lines; the input:" >&2
        grep -E "^(==|SUMMARY|thread|Test unit written|artifact_prefix)" "$log" | tail -8 >&2
        grep -A12 "panicked" "$log" | head -14 >&2
        echo "reproduce: $BIN/$t $artifacts/crash-*  (then keep it in fuzz/regressions/$t/)" >&2
        exit 1
    fi
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
    echo "fuzz $t: ${SECONDS_EACH}s, $execs executions ($speed/s), coverage $cov edges, corpus $(find "$corpus" -type f | wc -l) inputs, ${#regressions[@]} regressions replayed, no crash"
}

# One target per job slot; the first failure stops the script once the
# targets under way are done.
JOBS=${FUZZ_JOBS:-$(nproc)}
failed=0
for t in "${TARGETS[@]}"; do
    while (($(jobs -rp | wc -l) >= JOBS)); do
        wait -n || failed=1
    done
    ((failed)) && break
    campaign "$t" &
done
while (($(jobs -rp | wc -l) > 0)); do
    wait -n || failed=1
done
# The import target's scratch directories (one per fuzzing process).
rm -rf "${TMPDIR:-/tmp}"/autoperf-fuzz-import-*
exit $failed
