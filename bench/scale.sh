#!/usr/bin/env bash
# 50,000 closed-workload users, each with its own keep-alive connection and a
# 5 s think time, against nginx on loopback: peak memory (RSS of autoperf and
# all its generator processes together), achieved think time, errors.
#
#   bash bench/scale.sh                      # 50,000 users, 30 s measured
#   USERS=20000 DURATION=20 bash bench/scale.sh
#   KEEP=1 bash bench/scale.sh              # keep the results directory
#
# One process may hold only as many sockets as its open-file limit allows
# (20,000 here), and one source address has ~28,000 ephemeral ports toward
# one server port; autoperf spreads the users over generator processes and
# 127.0.0.x source addresses by itself. nginx gets 4 workers with reuseport,
# each well under its own limit.
set -euo pipefail

USERS=${USERS:-50000}
THINK=${THINK:-5s}
DURATION=${DURATION:-30}
HERE=$(cd "$(dirname "$0")" && pwd)

NGINX_WORKERS=4 NGINX_NOFILE=19000 NGINX_CONNECTIONS=18000 NGINX_LISTEN="reuseport backlog=65535"
# shellcheck source=bench/nginx.sh
source "$HERE/nginx.sh"

cat >"$WORK/scale.yaml" <<YAML
name: scale
target: {base_url: "http://127.0.0.1:$PORT", timeout: 30s}
think_time: $THINK
requests:
  get: {path: /100b.txt}
session:
  start: get
  transitions: {get: {get: 0.99}}
YAML

echo "$USERS users, think time $THINK, ${DURATION}s measured, nginx with 4 workers on 127.0.0.1:$PORT"
"$AUTOPERF" run "$WORK/scale.yaml" --users "$USERS" --duration "${DURATION}s" \
    --quiet --out "$WORK/out" ${AUTOPERF_ARGS:-} >"$WORK/run.out" 2>&1 &
RUN_PID=$!
# Peak of the sum of RSS over autoperf and its generator processes, and how
# many generator processes there were.
python3 - "$RUN_PID" >"$WORK/rss.txt" <<'PY' &
import os, sys, time
root = int(sys.argv[1]); peak = 0; procs = 0
def rss(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
def children(pid):
    try:
        return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []
while os.path.exists(f"/proc/{root}"):
    kids = children(root)
    total = rss(root) + sum(rss(k) for k in kids)
    peak = max(peak, total); procs = max(procs, len(kids))
    time.sleep(0.25)
print(peak, procs)
PY
RSS_PID=$!
wait "$RUN_PID" || { echo "autoperf failed:"; cat "$WORK/run.out"; exit 1; }
wait "$RSS_PID"
cat "$WORK/run.out"
python3 - "$WORK/out/run.json" $(cat "$WORK/rss.txt") <<'PY'
import json, sys
run = json.load(open(sys.argv[1])); peak = int(sys.argv[2]); procs = int(sys.argv[3])
lv = run["levels"][0]
tt = lv["think_time_s"]
gap = (tt["achieved"] - tt["configured"]) / tt["configured"] * 100
print()
print(f"users                 {lv['users']}")
print(f"generator processes   {procs}")
print(f"peak RSS (all)        {peak / 2**20:.0f} MiB  ({peak / lv['users'] / 1024:.1f} KiB per user)")
print(f"requests, errors      {lv['requests']}, {lv['errors']}  {lv.get('errors_by_kind', '')}")
print(f"throughput            {lv['throughput_rps']:.0f}/s")
print(f"think time            configured {tt['configured']:.3f} s, achieved {tt['achieved']:.4f} s ({gap:+.2f}%)")
print(f"response time ms      p50 {lv['response_time_ms']['p50']:.2f}  p99 {lv['response_time_ms']['p99']:.2f}")
print(f"client CPU            {lv['client']['cpu_util_cores']:.2f} cores")
for w in run.get("warnings", []):
    print("warning:", w)
PY
