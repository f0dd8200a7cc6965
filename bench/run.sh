#!/usr/bin/env bash
# autoperf vs its peer on nginx over loopback, side by side in one run:
# wrk over HTTP/1.1 (plain or TLS), h2load over HTTP/2 (cleartext h2c).
#
#   bash bench/run.sh                       # 5 rounds x 10 s, 64 connections
#   ROUNDS=3 DURATION=5 bash bench/run.sh   # shorter
#   PROTO=https bash bench/run.sh           # HTTPS (TLS 1.3), both tools
#   PROTO=h2c STREAMS=10 bash bench/run.sh  # HTTP/2, 10 streams a connection
#   LUA=1 bash bench/run.sh                 # both run a Lua hook per request
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
PROTO=${PROTO:-http}
STREAMS=${STREAMS:-1}
# 1: each tool runs the same trivial Lua per request — a counter, sent as
# a header: wrk's `request()` (-s), autoperf's `script:` request(ctx).
LUA=${LUA:-0}
NGINX_CPU=${NGINX_CPU:-0}
GEN_CPU=${GEN_CPU:-1}
HERE=$(cd "$(dirname "$0")" && pwd)

NEED_WRK=1 NGINX_PIN=$NGINX_CPU
case $PROTO in
    http) PEER=wrk SCHEME=http ;;
    https) PEER=wrk SCHEME=https NGINX_TLS=1 NGINX_LISTEN=ssl ;;
    h2c) PEER=h2load SCHEME=http NGINX_LISTEN=http2 ;;
    *) echo "PROTO must be http, https or h2c, not $PROTO" >&2; exit 2 ;;
esac
if [[ $PEER == h2load ]] && ! command -v h2load >/dev/null; then
    echo "installing nghttp2-client (h2load)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nghttp2-client >/dev/null
fi
if [[ $LUA == 1 && $PEER != wrk ]]; then
    echo "LUA=1 compares with wrk's Lua: PROTO http or https" >&2; exit 2
fi
# shellcheck source=bench/nginx.sh
source "$HERE/nginx.sh"
WRK_LUA=()
if [[ $LUA == 1 ]]; then
    cat >"$WORK/wrk-counter.lua" <<'LUA'
local counter = 0
request = function()
  counter = counter + 1
  wrk.headers["X-Counter"] = tostring(counter)
  return wrk.format()
end
LUA
    cat >"$WORK/counter.lua" <<'LUA'
local counter = 0
function request(ctx)
  counter = counter + 1
  ctx:set_header("X-Counter", counter)
end
LUA
    WRK_LUA=(-s "$WORK/wrk-counter.lua")
fi

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
    cpu=$(cpu_of wrk -t1 -c"$CONNS" -d"${DURATION}s" "${WRK_LUA[@]}" "$SCHEME://127.0.0.1:$PORT/$1")
    python3 - "$cpu" "$WORK/gen.out" <<'PY'
import re, sys
cpu = float(sys.argv[1]); text = open(sys.argv[2]).read()
reqs = int(re.search(r"(\d+) requests in", text).group(1))
rps = float(re.search(r"Requests/sec:\s*([\d.]+)", text).group(1))
errs = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", text)
print(f"{rps:.0f} {cpu / reqs * 1e6:.3f} {'ERR' if errs else 'ok'}")
PY
}

run_h2load() { # file -> "rps cpu_per_req_us"
    local cpu
    cpu=$(cpu_of h2load -t1 -c"$CONNS" -m"$STREAMS" -D"$DURATION" --warm-up-time="$WARMUP" \
        "$SCHEME://127.0.0.1:$PORT/$1")
    python3 - "$cpu" "$WORK/gen.out" "$WARMUP" "$DURATION" <<'PY'
import re, sys
cpu = float(sys.argv[1]); text = open(sys.argv[2]).read()
warm, secs = float(sys.argv[3]), float(sys.argv[4])
rps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", text).group(1))
m = re.search(r"requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored", text)
ok = int(m.group(3)) == 0 and int(m.group(4)) == 0
# CPU covers the warm-up too: requests over warm-up + window at the rate.
print(f"{rps:.0f} {cpu / (rps * (secs + warm)) * 1e6:.3f} {'ok' if ok else 'ERR'}")
PY
}

run_peer() { if [[ $PEER == wrk ]]; then run_wrk "$@"; else run_h2load "$@"; fi; }

run_autoperf() { # file -> "rps cpu_per_req_us whole_cpu_per_req_us"
    local out="$WORK/ap-out" cpu target
    rm -rf "$out"
    case $PROTO in
        http) target="{base_url: \"http://127.0.0.1:$PORT\"}" ;;
        https) target="{base_url: \"https://127.0.0.1:$PORT\", tls: {ca_file: \"$CERT\"}}" ;;
        h2c) target="{base_url: \"http://127.0.0.1:$PORT\", http: 2, streams_per_connection: $STREAMS}" ;;
    esac
    cat >"$WORK/bench.yaml" <<YAML
name: bench
target: $target
think_time: 0s
requests:
  get: {path: "/$1", headers: {User-Agent: ""}}
session:
  start: get
YAML
    if [[ $LUA == 1 ]]; then echo "script: counter.lua" >>"$WORK/bench.yaml"; fi
    cpu=$(cpu_of "$AUTOPERF" run "$WORK/bench.yaml" --users "$((CONNS * STREAMS))" --duration "${DURATION}s" \
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

echo "$PROTO$([[ $LUA == 1 ]] && echo ' with a Lua hook'): nginx on core $NGINX_CPU, generators on core $GEN_CPU, $CONNS connections x $STREAMS streams, $ROUNDS x ${DURATION}s"
echo "autoperf: $AUTOPERF"
echo "$PEER: $(command -v $PEER)"
RESULTS="$WORK/results.txt"
: >"$RESULTS"
for file in 100b.txt 4k.txt; do
    for round in $(seq "$ROUNDS"); do
        if ((round % 2)); then order="$PEER autoperf"; else order="autoperf $PEER"; fi
        for tool in $order; do
            if [[ $tool == "$PEER" ]]; then r=$(run_peer "$file"); else r=$(run_autoperf "$file"); fi
            echo "$file $round $tool $r" | tee -a "$RESULTS"
        done
    done
done

python3 - "$RESULTS" "$PEER" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
peer = sys.argv[2]
def mmm(xs):
    return f"{min(xs):9.3f} {statistics.median(xs):9.3f} {max(xs):9.3f}"
print()
print("req/s and CPU µs/request (min / median / max over rounds)")
print(f"  {peer} CPU = whole process; autoperf CPU = measured window (client.cpu_util_cores x duration_s / requests)")
for f in sorted({r[0] for r in rows}):
    by = lambda tool: {int(r[1]): r for r in rows if r[0] == f and r[2] == tool}
    w, a = by(peer), by("autoperf")
    rounds = sorted(set(w) & set(a))
    wr = [float(w[i][3]) for i in rounds]; ar = [float(a[i][3]) for i in rounds]
    wc = [float(w[i][4]) for i in rounds]; ac = [float(a[i][4]) for i in rounds]
    awc = [float(a[i][5]) for i in rounds]
    print(f"\n{f}:                         min       med       max")
    print(f"  {peer:9} req/s        {mmm(wr)}")
    print(f"  autoperf  req/s        {mmm(ar)}")
    print(f"  ratio autoperf/{peer:6} {mmm([x / y for x, y in zip(ar, wr)])}   (throughput, same round)")
    print(f"  {peer:9} CPU µs/req   {mmm(wc)}")
    print(f"  autoperf  CPU µs/req   {mmm(ac)}   (whole process, incl. warm-up: {statistics.median(awc):.3f})")
    print(f"  ratio autoperf/{peer:6} {mmm([x / y for x, y in zip(ac, wc)])}   (CPU per request, same round)")
    errs = [r for r in rows if r[0] == f and r[-1] != "ok"]
    if errs:
        print(f"  WARNING: errors in {len(errs)} runs")
PY
