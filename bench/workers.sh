#!/usr/bin/env bash
# Multi-host load on one machine: network namespaces play the hosts — nginx
# on a target host, WORKERS autoperf workers, a controller — joined by a
# bridge in a switch namespace, with addresses of the benchmarking range
# 198.18.0.0/24 (RFC 2544). Nothing leaves the namespaces.
#
# Runs issue 14's two levels and holds each against nginx's access log:
#   - closed: USERS users (60,000) with THINK think time (5 s);
#   - open:   RATE arrivals/s (100,000), one request each;
# each WARMUP + DURATION, on all workers. Prints, per level: requests nginx
# logged, requests the merged results counted (every second, warm-up
# included), their difference (the issue asks ≤ 0.5%), throughput, p99
# (from the merged histograms) and each worker's share.
#
#   sudo bash bench/workers.sh                       # the issue's figures
#   USERS=3000 RATE=5000 DURATION=10s bash bench/workers.sh   # a quick look
#
# LEVELS=scale runs issue 14's scale-out instead: worker w1 throttled to
# QUOTA cores (0.02) by a cgroup CPU quota (a container's CPU limit), and a
# capacity analysis of SCALE_LEVELS user levels (5,300; 100 ms think)
# against nginx, twice: on w1 alone (it should stop at client_bottleneck)
# and on the pool, starting on w1 (it should run the limited level again on
# more workers, split by their CPU, and complete).
#
# Needs root (ip netns, cgroups), nginx (installed from apt when missing).
set -euo pipefail

USERS=${USERS:-60000}
THINK=${THINK:-5s}
RATE=${RATE:-100000}
DURATION=${DURATION:-30s}
WARMUP=${WARMUP:-10s}
WORKERS=${WORKERS:-3}
LEVELS=${LEVELS:-closed open}
QUOTA=${QUOTA:-0.02}
SCALE_LEVELS=${SCALE_LEVELS:-5,300}
ROOT=$(cd "$(dirname "$0")/.." && pwd)

command -v nginx >/dev/null || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
}
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if [[ -z "${AUTOPERF:-}" ]]; then
    (cd "$ROOT" && cargo build --release --quiet --bin autoperf)
    AUTOPERF="${CARGO_TARGET_DIR:-$ROOT/target}/release/autoperf"
fi

TAG=apb$$
WORK=$(mktemp -d /tmp/autoperf-workers.XXXXXX)
chmod 755 "$WORK"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for ns in $(ip netns list | awk '{print $1}' | grep "^$TAG-" || true); do ip netns del "$ns"; done
    if [[ -n "${KEEP:-}" ]]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# --- the hosts ---------------------------------------------------------
ip netns add "$TAG-sw"
ip -n "$TAG-sw" link add br0 type bridge
ip -n "$TAG-sw" link set br0 up
i=0
host() { # name address
    local ns="$TAG-$1"
    ip netns add "$ns"
    ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$TAG-sw"
    ip -n "$TAG-sw" link set "p$i" master br0
    ip -n "$TAG-sw" link set "p$i" up
    ip -n "$ns" addr add "$2/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    # Per-namespace: a worker's 20,000 connections to one port need the
    # whole port range; nginx's accept queue must take a burst of them.
    ip netns exec "$ns" sysctl -qw net.ipv4.ip_local_port_range="1024 65535"
    ip netns exec "$ns" sysctl -qw net.core.somaxconn=65535
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_max_syn_backlog=65535
    i=$((i + 1))
}
TARGET=198.18.0.1
host target "$TARGET"
host ctl 198.18.0.2
WORKER_LIST=()
for w in $(seq 1 "$WORKERS"); do
    host "w$w" "198.18.0.$((10 + w))"
    WORKER_LIST+=("198.18.0.$((10 + w)):7420")
done

# --- nginx on the target -----------------------------------------------
mkdir -p "$WORK/www" "$WORK/logs" "$WORK/temp"
head -c 100 /dev/zero | tr '\0' a >"$WORK/www/100b.txt"
chmod 644 "$WORK/www/100b.txt"
cat >"$WORK/nginx.conf" <<CONF
worker_processes 4;
worker_rlimit_nofile 20000;
pid $WORK/nginx.pid;
error_log $WORK/logs/error.log warn;
events { worker_connections 19000; }
http {
    log_format one '\$status';
    access_log $WORK/logs/access.log one buffer=1m flush=1s;
    keepalive_requests 1000000000;
    keepalive_timeout 600s;
    client_body_temp_path $WORK/temp/body;
    proxy_temp_path $WORK/temp/proxy;
    fastcgi_temp_path $WORK/temp/fastcgi;
    uwsgi_temp_path $WORK/temp/uwsgi;
    scgi_temp_path $WORK/temp/scgi;
    default_type application/octet-stream;
    server {
        listen $TARGET:80 backlog=65535 reuseport;
        root $WORK/www;
    }
}
CONF
ip netns exec "$TAG-target" "$NGINX" -p "$WORK" -c "$WORK/nginx.conf" -g 'daemon off;' &
PIDS+=($!)

# --- the workers ---------------------------------------------------------
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$WORK/token"
for w in $(seq 1 "$WORKERS"); do
    # nsenter, not `ip netns exec`: that remounts /sys, and a worker would
    # no longer see its cgroup's CPU quota (LEVELS=scale throttles w1).
    nsenter --net="/var/run/netns/$TAG-w$w" "$AUTOPERF" worker --listen "198.18.0.$((10 + w)):7420" \
        --token-file "$WORK/token" --name "w$w" >"$WORK/w$w.out" 2>"$WORK/w$w.err" &
    PIDS+=($!)
done
sleep 1

cat >"$WORK/closed.yaml" <<YAML
name: workers-closed
target: {base_url: "http://$TARGET:80", timeout: 10s}
think_time: {exponential: $THINK}
requests:
  small: {path: /100b.txt}
session: {start: small, transitions: {small: {small: 0.99}}}
YAML
cat >"$WORK/open.yaml" <<YAML
name: workers-open
target: {base_url: "http://$TARGET:80", timeout: 10s}
requests:
  small: {path: /100b.txt}
session: {start: small}
YAML

run_level() { # name, load flags…
    local name=$1
    shift
    : >"$WORK/logs/access.log"
    local began=$SECONDS code=0
    ip netns exec "$TAG-ctl" "$AUTOPERF" run "$WORK/$name.yaml" "$@" \
        --duration "$DURATION" --warmup "$WARMUP" \
        --workers "$(IFS=,; echo "${WORKER_LIST[*]}")" --worker-token-file "$WORK/token" \
        --min-workers "$WORKERS" --quiet --out "$WORK/$name" >"$WORK/$name.log" 2>&1 || code=$?
    sleep 2 # nginx flushes its log buffer every second
    python3 - "$WORK" "$name" "$code" "$((SECONDS - began))" <<'PY'
import csv, json, sys
work, name, code, wall = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
logged = sum(1 for _ in open(f"{work}/logs/access.log"))
counted = sum(int(r["requests"]) for r in csv.DictReader(open(f"{work}/{name}/timeseries.csv")))
run = json.load(open(f"{work}/{name}/run.json"))
level = run["levels"][0]
diff = (counted - logged) / logged * 100 if logged else float("nan")
print(f"{name}: exit {code}, {wall} s wall")
print(f"  nginx logged {logged:,}, merged results counted {counted:,}: {diff:+.3f}%"
      f" ({'within' if abs(diff) <= 0.5 else 'OUTSIDE'} 0.5%)")
print(f"  measured window: {level['requests']:,} requests, {level['errors']:,} errors,"
      f" {level['throughput_rps']:,.0f} req/s, p99 {level['response_time_ms']['p99']:.2f} ms,"
      f" client bottleneck {level['client_bottleneck']}")
if level.get("achieved_rate_rps") is not None:
    print(f"  arrivals: {level['achieved_rate_rps']:,.0f}/s achieved")
for w in level.get("workers", []):
    print(f"  {w['name']} {w['address']}: {w['cores']} cores, {w['shards']} shards in"
          f" {w['processes']} process(es), {w['connections']:,} connections,"
          f" clock {w['clock_offset_ms']:+.3f} ms (rtt {w['rtt_ms']:.3f} ms)")
for warning in run.get("warnings", []):
    print(f"  warning: {warning}")
PY
}

# The scale-out: a capacity analysis on a throttled w1 alone, then on the
# pool starting on w1.
scale() {
    cat >"$WORK/scale.yaml" <<YAML
name: workers-scale
target: {base_url: "http://$TARGET:80", timeout: 10s}
think_time: {exponential: 100ms}
requests:
  small: {path: /100b.txt}
session: {start: small, transitions: {small: {small: 0.9}}}
YAML
    local cg=/sys/fs/cgroup/cpu/autoperf-bench-$$
    mkdir -p "$cg"
    echo 100000 >"$cg/cpu.cfs_period_us"
    # (awk, not python: python's write to this sysfs file fails with EINVAL)
    awk -v q="$QUOTA" 'BEGIN { printf "%d\n", q * 100000 }' >"$cg/cpu.cfs_quota_us"
    pgrep -f -- "--name w1\b" | while read -r pid; do echo "$pid" >"$cg/cgroup.procs"; done
    for pool in alone all; do
        local list=${WORKER_LIST[0]}
        [[ $pool == all ]] && list=$(IFS=,; echo "${WORKER_LIST[*]}")
        local code=0 began=$SECONDS
        ip netns exec "$TAG-ctl" "$AUTOPERF" capacity "$WORK/scale.yaml" \
            --levels "$SCALE_LEVELS" --duration 10s --no-agents \
            --workers "$list" --worker-token-file "$WORK/token" \
            --quiet --out "$WORK/scale-$pool" >"$WORK/scale-$pool.log" 2>&1 || code=$?
        python3 - "$WORK/scale-$pool" "$pool" "$code" "$((SECONDS - began))" <<'PY'
import json, sys
out, pool, code, wall = sys.argv[1:5]
run = json.load(open(f"{out}/run.json"))
a = run["analysis"]
print(f"scale, {pool}: exit {code}, {wall} s, stop_reason {a['stop_reason']},"
      f" max throughput {a.get('max_throughput_rps')} req/s")
for l in run["levels"]:
    ws = ", ".join(f"{w['name']} ({w['cpu']:.2f} cpu) {w['connections']}" for w in l.get("workers", []))
    print(f"  level {l['level']}: {l['users']} users, {l['throughput_rps']:.1f} req/s,"
          f" p99 {l['response_time_ms']['p99']:.1f} ms, client bottleneck {l['client_bottleneck']} [{ws}]")
for l in run.get("superseded", []):
    print(f"  superseded level {l['level']}: {l['users']} users on {len(l['workers'])} worker(s),"
          f" {l['throughput_rps']:.1f} req/s (generator-bound)")
PY
    done
    # Back to the root cgroup before it goes.
    while read -r pid; do echo "$pid" >/sys/fs/cgroup/cpu/cgroup.procs; done <"$cg/cgroup.procs"
    rmdir "$cg"
}

for level in $LEVELS; do
    case $level in
    closed) run_level closed --users "$USERS" ;;
    open) run_level open --rate "$RATE/s" --max-in-flight 60000 ;;
    scale) scale ;;
    *) echo "unknown level $level (closed, open, scale)" >&2 && exit 2 ;;
    esac
done
