#!/usr/bin/env bash
# autoperf vs wrk on nginx over loopback, side by side in one run.
#
#   bash bench/run.sh                       # 5 rounds x 10 s, 64 connections
#   ROUNDS=3 DURATION=5 bash bench/run.sh   # shorter
#   AUTOPERF=/path/to/autoperf bash bench/run.sh
#
# nginx (2 workers) is pinned to core 0, each generator in turn to core 1;
# the order of the two generators alternates from round to round. See
# bench/README.md for what each CPU figure covers.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-64}
NGINX_CPU=${NGINX_CPU:-0}
GEN_CPU=${GEN_CPU:-1}
HERE=$(cd "$(dirname "$0")" && pwd)

NEED_WRK=1 NGINX_PIN=$NGINX_CPU
# shellcheck source=bench/nginx.sh
source "$HERE/nginx.sh"

# Runs "$@" pinned to the generator core; prints the CPU seconds
# (utime + stime) the child used, as the kernel accounted it when it was
# reaped: the same counters /proc/PID/stat shows, whole process.
cpu_of() {
    local out
    out=$( (taskset -c "$GEN_CPU" "$@" >"$WORK/gen.out" 2>"$WORK/gen.err"; times) | tail -1)
    # "0m1.234s 0m0.567s"
    python3 - "$out" <<'PY'
import re, sys
m = [float(a) * 60 + float(b) for a, b in re.findall(r"(\d+)m([\d.]+)s", sys.argv[1])]
print(sum(m))
PY
}

run_wrk() { # file -> "rps cpu_per_req_us"
    local cpu
    cpu=$(cpu_of wrk -t1 -c"$CONNS" -d"${DURATION}s" "http://127.0.0.1:$PORT/$1")
    python3 - "$cpu" "$WORK/gen.out" <<'PY'
import re, sys
cpu = float(sys.argv[1]); text = open(sys.argv[2]).read()
reqs = int(re.search(r"(\d+) requests in", text).group(1))
rps = float(re.search(r"Requests/sec:\s*([\d.]+)", text).group(1))
errs = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", text)
print(f"{rps:.0f} {cpu / reqs * 1e6:.3f} {'ERR' if errs else 'ok'}")
PY
}

run_autoperf() { # file -> "rps cpu_per_req_us whole_cpu_per_req_us"
    local out="$WORK/ap-out" cpu
    rm -rf "$out"
    cat >"$WORK/bench.yaml" <<YAML
name: bench
target: {base_url: "http://127.0.0.1:$PORT"}
think_time: 0s
requests:
  get: {path: "/$1", headers: {User-Agent: ""}}
session:
  start: get
YAML
    cpu=$(cpu_of "$AUTOPERF" run "$WORK/bench.yaml" --users "$CONNS" --duration "${DURATION}s" \
        --warmup "${WARMUP}s" --quiet --out "$out")
    python3 - "$cpu" "$out/run.json" "$WARMUP" <<'PY'
import json, sys
cpu = float(sys.argv[1]); run = json.load(open(sys.argv[2])); warm = float(sys.argv[3])
lv = run["levels"][0]
reqs, secs = lv["requests"], lv["duration_s"]
window = lv["client"]["cpu_util_cores"] * secs / reqs
# Whole process: probe, warm-up and files too; its requests are estimated
# from the measured rate over warm-up + window.
whole = cpu / (lv["throughput_rps"] * (secs + warm))
print(f"{lv['throughput_rps']:.0f} {window * 1e6:.3f} {whole * 1e6:.3f} {'ERR' if lv['errors'] else 'ok'}")
PY
}

echo "nginx on core $NGINX_CPU, generators on core $GEN_CPU, $CONNS connections, $ROUNDS x ${DURATION}s"
echo "autoperf: $AUTOPERF"
echo "wrk:      $(command -v wrk)"
RESULTS="$WORK/results.txt"
: >"$RESULTS"
for file in 100b.txt 4k.txt; do
    for round in $(seq "$ROUNDS"); do
        if ((round % 2)); then order="wrk autoperf"; else order="autoperf wrk"; fi
        for tool in $order; do
            if [[ $tool == wrk ]]; then r=$(run_wrk "$file"); else r=$(run_autoperf "$file"); fi
            echo "$file $round $tool $r" | tee -a "$RESULTS"
        done
    done
done

python3 - "$RESULTS" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def mmm(xs):
    return f"{min(xs):9.3f} {statistics.median(xs):9.3f} {max(xs):9.3f}"
print()
print("req/s and CPU µs/request (min / median / max over rounds)")
print("  wrk CPU = whole process; autoperf CPU = measured window (client.cpu_util_cores x duration_s / requests)")
for f in sorted({r[0] for r in rows}):
    by = lambda tool: {int(r[1]): r for r in rows if r[0] == f and r[2] == tool}
    w, a = by("wrk"), by("autoperf")
    rounds = sorted(set(w) & set(a))
    wr = [float(w[i][3]) for i in rounds]; ar = [float(a[i][3]) for i in rounds]
    wc = [float(w[i][4]) for i in rounds]; ac = [float(a[i][4]) for i in rounds]
    awc = [float(a[i][5]) for i in rounds]
    print(f"\n{f}:                         min       med       max")
    print(f"  wrk       req/s        {mmm(wr)}")
    print(f"  autoperf  req/s        {mmm(ar)}")
    print(f"  ratio autoperf/wrk     {mmm([x / y for x, y in zip(ar, wr)])}   (throughput, same round)")
    print(f"  wrk       CPU µs/req   {mmm(wc)}")
    print(f"  autoperf  CPU µs/req   {mmm(ac)}   (whole process, incl. warm-up: {statistics.median(awc):.3f})")
    print(f"  ratio autoperf/wrk     {mmm([x / y for x, y in zip(ac, wc)])}   (CPU per request, same round)")
    errs = [r for r in rows if r[0] == f and r[-1] != "ok"]
    if errs:
        print(f"  WARNING: errors in {len(errs)} runs")
PY
