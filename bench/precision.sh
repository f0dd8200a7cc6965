#!/usr/bin/env bash
# How precise a short level is, and whether its interval says so honestly
# (issue: curves you can trust from short levels).
#
# The testbed with a known demand (/cpu?ms=2, one web worker), 40 users,
# think time exponential with mean 1 s (about 40 req/s, 800 requests in
# 20 s). One 5-minute level gives the long-run throughput; then REPS
# repetitions of a 20 s level (2 s warm-up) each give a throughput and its
# 95% interval (`ci95.throughput_rps`). Prints how many intervals cover
# the long-run throughput, and the spread (relative standard deviation)
# of the repetitions' throughputs.
#
# With BASELINE=path/to/an/older/autoperf, the same repetitions run with
# it as well, and the ratio of the two spreads is printed: an autoperf
# built before the think-time stream (git 879c724^) draws each think time
# independently, so its short levels' throughput wanders with the mean of
# their draws.
#
#   bash bench/precision.sh                       # about 13 minutes
#   BASELINE=/tmp/old/autoperf bash bench/precision.sh   # about 21 minutes
#   REPS=5 LONG=60s bash bench/precision.sh       # a quick look
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-target}/release/autoperf
reps=${REPS:-20}
long=${LONG:-300s}
work=$(mktemp -d /tmp/autoperf-precision.XXXXXX)
. bench/lib.sh

web=$(start "$work/testbed.log" testbed --listen 127.0.0.1:0 --web-workers 1)
cat >"$work/s.yaml" <<YAML
name: precision
target: {base_url: "$web"}
think_time: {exponential: 1s}
requests:
  cpu: {path: "/cpu?ms=2"}
YAML

# One level with binary $1 into directory $2, $3 long.
level() {
    "$1" run "$work/s.yaml" --users 40 --duration "$3" --warmup 2s --quiet \
        --out "$2" >/dev/null
}

echo "long run: one level of $long…"
level "$bin" "$work/long" "$long"
for r in $(seq "$reps"); do
    level "$bin" "$work/new-$r" 20s
    [ -n "${BASELINE:-}" ] && level "$BASELINE" "$work/old-$r" 20s
    echo "  repetition $r of $reps done"
done

python3 - "$work" "$reps" "${BASELINE:+old}" <<'PY'
import json, statistics, sys
work, reps, old = sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else ""
def level(d):
    return json.load(open(f"{work}/{d}/run.json"))["levels"][0]
truth = level("long")["throughput_rps"]
print(f"long run: {truth:.3f} req/s")
def report(kind):
    xs, covered, halves = [], 0, []
    for r in range(1, reps + 1):
        l = level(f"{kind}-{r}")
        x = l["throughput_rps"]
        xs.append(x)
        ci = l.get("ci95")
        if ci:
            h = ci["throughput_rps"]
            halves.append(h / x)
            covered += abs(x - truth) <= h
    spread = statistics.stdev(xs) / statistics.mean(xs)
    line = f"{kind}: {reps} levels of 20 s, throughput {statistics.mean(xs):.3f} req/s, spread {spread*100:.2f}%"
    if halves:
        line += f", 95% interval ±{statistics.mean(halves)*100:.1f}% on average, covers the long run in {covered} of {reps}"
    print(line)
    return spread
new = report("new")
if old:
    before = report("old")
    print(f"spread now / before: {new / before:.2f}")
PY
