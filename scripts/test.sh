#!/usr/bin/env bash
# The one test command (README and .ci/run call exactly this): installs what
# the tests need on a fresh machine, builds every test once, runs them, and
# says how long each phase and the slowest tests took.
#
#   bash scripts/test.sh              # everything, as CI runs it
#   bash scripts/test.sh capacity::   # only tests whose name holds this (no fuzzing)
#
#   set-up ── build ──┬── tests side by side ── tests alone ──┬── fuzz
#                     └── fuzz targets' build, idle priority ─┘
#   (Kafka's jars, the Python venvs: fetched in the background from set-up on)
#
# - The tests are built for x86_64-unknown-linux-musl, so the binary they
#   run is the static one the container image ships (deploy/Dockerfile):
#   the static build costs no second build of everything.
# - Tests run side by side, TEST_THREADS (4) at a time, except those in
#   modules named `alone` (they measure a CPU limit or a process's own CPU,
#   or pin a busy loop to a core): those run one at a time afterwards, with
#   nothing beside them but the fuzz build.
# - The fuzz targets build while the tests run, at idle priority
#   (SCHED_IDLE, nice 19): they take only CPU the tests leave unused.
# - Per-test times, phase times and the slowest tests: printed at the end
#   and kept in target/test-times.txt; every executable's output is in
#   target/test-logs/.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TARGET=x86_64-unknown-linux-musl
TEST_THREADS=${TEST_THREADS:-4}
FILTER=("$@")
LOGS=$ROOT/target/test-logs
STATIC=$ROOT/target/$TARGET/release/autoperf
started=$SECONDS
phases=()
failures=0

# The machine's CPU counters since boot, in ticks: "busy total".
cpu_ticks() {
    awk '/^cpu / { total = 0; for (i = 2; i <= NF; i++) total += $i; print total - $5 - $6, total }' /proc/stat
}

# `phase NAME COMMAND…`: runs it, timed, and keeps for the report how long
# it took and how busy it kept the machine's CPUs.
phase() {
    local name=$1 began=$SECONDS rc=0 busy0 total0 busy1 total1
    shift
    echo "== $name ($((SECONDS - started)) s in)"
    read -r busy0 total0 < <(cpu_ticks)
    "$@" || rc=$?
    read -r busy1 total1 < <(cpu_ticks)
    phases+=("$(printf '%-22s %5d s   CPU %3d%% busy%s' "$name" $((SECONDS - began)) \
        $((100 * (busy1 - busy0) / (total1 - total0 + 1))) "$( ((rc)) && echo "   FAILED")")")
    ((rc)) && failures=$((failures + 1))
    return $rc
}

# musl-gcc for the C parts of the static build (ring, zstd; Debian's
# musl-tools) and the musl target (rustup): the build needs them first.
install_build_tools() {
    if ! command -v musl-gcc >/dev/null 2>&1; then
        apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends musl-tools ||
            return 1
    fi
    rustup target list --installed | grep -qx "$TARGET" || rustup target add "$TARGET"
}

# What only the network makes slow, fetched while the tests build:
# Chromium for the HTML report tests and Prometheus for the tests that
# read demands through it (Debian's, in one apt call), Kafka's jars (Maven
# Central, cached in ~/.m2) and the Python venv of the Kafka tests'
# independent client; the Kubernetes schemas, and the manifests validated
# against them.
fetch_in_background() {
    (
        missing=()
        command -v chromium >/dev/null 2>&1 || missing+=(chromium)
        command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
        if ((${#missing[@]})); then
            apt-get update -qq &&
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
        fi
    ) >"$LOGS/fetch-chromium.log" 2>&1 &
    FETCH_CHROMIUM=$!
    (bash scripts/kafka.sh classpath >/dev/null && bash scripts/pyenv.sh) >"$LOGS/fetch-kafka.log" 2>&1 &
    FETCH_KAFKA=$!
    bash scripts/k8s-validate.sh >"$LOGS/k8s-validate.log" 2>&1 &
    K8S_VALIDATE=$!
}

# Waits for what the tests need of the fetches.
fetched() {
    await "Chromium and Prometheus" "$FETCH_CHROMIUM" "$LOGS/fetch-chromium.log" &&
        await "Kafka's jars and the Python venv" "$FETCH_KAFKA" "$LOGS/fetch-kafka.log"
}

# Builds every test executable of the workspace and lists them: each with
# the package directory cargo would run it in, and a name for the logs
# (package/target).
build_tests() {
    CC_x86_64_unknown_linux_musl=musl-gcc cargo test --workspace --release --locked \
        --target "$TARGET" --no-run --message-format=json-render-diagnostics >"$LOGS/build.json" ||
        return 1
    python3 - "$LOGS/build.json" >"$LOGS/executables" <<'EOF'
import json, os, sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        m = json.loads(line)
        if m.get("reason") == "compiler-artifact" and m["profile"]["test"] and m.get("executable"):
            package = os.path.basename(os.path.dirname(m["manifest_path"]))
            if os.path.dirname(m["manifest_path"]) == os.getcwd():
                package = "autoperf"
            print("\t".join([os.path.dirname(m["manifest_path"]), m["executable"], package + "/" + m["target"]["name"]]))
EOF
}

# The binary the tests run is the image's: no program interpreter and no
# shared library, judged from the ELF headers (ldd's exit code differs
# between glibc versions).
check_static() {
    if readelf -lW "$STATIC" | grep -q 'program interpreter' || readelf -dW "$STATIC" | grep -q '(NEEDED)'; then
        echo "$STATIC is dynamically linked:"
        readelf -lW "$STATIC" | grep 'program interpreter'
        readelf -dW "$STATIC" | grep '(NEEDED)'
        return 1
    fi
    echo "$STATIC: static"
}

# `wanted KIND NAME`: whether test NAME runs in KIND (`side` or `alone`)
# under the command line's filters (any of them, as libtest takes them).
wanted() {
    local kind=$1 name=$2 f
    case $kind:$name in
    side:*alone::*) return 1 ;;
    alone:*alone::*) ;;
    alone:*) return 1 ;;
    esac
    ((${#FILTER[@]})) || return 0
    for f in "${FILTER[@]}"; do
        [[ $name == *"$f"* ]] && return 0
    done
    return 1
}

# `run_tests KIND THREADS`: every executable's tests of KIND. libtest's
# per-test times are on: RUSTC_BOOTSTRAP=1 in the tests' environment only
# unlocks `--report-time` there (cargo never sees it, so nothing rebuilds).
run_tests() {
    local kind=$1 threads=$2 rc=0 dir exe name log test
    while IFS=$'\t' read -r dir exe name; do
        local tests=()
        while IFS= read -r test; do
            wanted "$kind" "$test" && tests+=("$test")
        done < <("$exe" --list --format terse 2>/dev/null | sed -n 's/: test$//p')
        ((${#tests[@]})) || continue
        log=$LOGS/$kind-${name//\//-}.log
        (cd "$dir" && RUSTC_BOOTSTRAP=1 "$exe" --exact "${tests[@]}" --test-threads="$threads" \
            -Z unstable-options --report-time) >"$log" 2>&1
        local status=$?
        sed -n 's/^test \(.*\) \.\.\. \([a-zA-Z]*\) <\([0-9.]*\)s>$/\3 \1 \2/p' "$log" |
            sed "s|^\([^ ]*\) |\1 $name::|" >>"$LOGS/times"
        echo "  $name: $(grep '^test result' "$log" | tail -1)"
        if ((status)); then
            rc=1
            echo "---- $name: failed ($log):"
            sed -n '/^failures:$/,$p' "$log" | head -300
        fi
    done <"$LOGS/executables"
    return $rc
}

# `await NAME PID`: waits for a background job, showing its log if it failed.
await() {
    local name=$1 pid=$2 log=$3
    if ! wait "$pid"; then
        echo "$name failed ($log):"
        tail -40 "$log"
        return 1
    fi
    tail -3 "$log"
}

# `unidle PID`: every process of PID's session (setsid forks when PID leads
# a process group) back to normal priority (best effort: lowering a nice
# value may need privileges).
unidle() {
    local own sid pid
    own=$(ps -o sid= -p $$ | tr -d ' ')
    sid=$(ps -o sid= --ppid "$1" -p "$1" 2>/dev/null | tr -d ' ' | grep -vx "$own" | head -1)
    [[ $sid ]] || return 0
    for pid in $(ps -o pid= -s "$sid" 2>/dev/null); do
        chrt --other -p 0 "$pid" >/dev/null 2>&1
        renice -n 0 -p "$pid" >/dev/null 2>&1
    done
    return 0
}

report() {
    {
        echo "phases:"
        printf '  %s\n' "${phases[@]}"
        printf '  %-22s %5d s\n' total $((SECONDS - started))
        echo "slowest tests (wall time of each; side by side or alone):"
        sort -rn "$LOGS/times" 2>/dev/null | head -25 |
            awk '{ printf "  %7.1f s  %s%s\n", $1, $2, ($3 == "ok" ? "" : "  " $3) }'
    } | tee "$ROOT/target/test-times.txt"
}

# The whole run is one function, read before anything runs: a script bash
# reads as it goes breaks when edited mid-run.
main() {
    mkdir -p "$LOGS"
    rm -f "$LOGS"/*.log "$LOGS/times"
    trap 'bash scripts/kafka.sh stop >/dev/null 2>&1' EXIT

    phase set-up install_build_tools || exit 1
    fetch_in_background
    phase build build_tests || exit 1
    phase static check_static
    full=$((${#FILTER[@]} == 0))
    if ((full)); then
        # Only the fuzz targets' build: the campaign runs after the tests.
        # Its own session, so that every compiler it starts can be found
        # again below.
        setsid chrt --idle 0 nice -n 19 bash scripts/fuzz.sh --build-only >"$LOGS/fuzz-build.log" 2>&1 &
        FUZZ_BUILD=$!
    fi
    phase fetch fetched
    phase "tests side by side" run_tests side "$TEST_THREADS"
    phase "tests alone" run_tests alone 1
    phase manifests await "the Kubernetes manifests' validation" "$K8S_VALIDATE" "$LOGS/k8s-validate.log"
    if ((full)); then
        # A short campaign of every parser that takes untrusted bytes (20 s
        # each after replaying every crash ever found; bench/README.md has the
        # hour-long ones).
        # The tests are done: the rest of the build runs at normal priority
        # (at idle priority, a busy neighbour would starve it for good).
        unidle "$FUZZ_BUILD"
        phase "fuzz build" await "the fuzz targets' build" "$FUZZ_BUILD" "$LOGS/fuzz-build.log" &&
            phase fuzz bash scripts/fuzz.sh 7
    fi
    report
    ((failures == 0))
}

main
