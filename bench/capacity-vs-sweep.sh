#!/usr/bin/env bash
# The paper's comparison (AutoPerf 3.1.1): the automatic capacity analysis
# against a fine manual sweep of the same system, in the same run.
#
# Testbed with one web worker, /db?web_ms=4&db_ms=1, think time 0.5 s: the
# true saturation throughput is 250/s and N* ≈ 126. The sweep runs 10, 20, …
# 190 users (to 1.5 N*), 10 s each. Prints levels, time, max throughput, N*
# and the RMS relative difference of the automatic curve (interpolated)
# from the sweep's.
#
#   bash bench/capacity-vs-sweep.sh            # about 8 minutes on 2 cores
#   SWEEP_DURATION=20s bash bench/capacity-vs-sweep.sh
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-target}/release/autoperf
work=$(mktemp -d /tmp/autoperf-sweep.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# A process that prints its URL on its first line; returns the URL.
start() {
    local log=$1; shift
    "$bin" "$@" >"$log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do
        if url=$(grep -o 'http://[0-9.:]*' "$log" | head -1) && [ -n "$url" ]; then
            echo "$url"; return
        fi
        sleep 0.1
    done
    echo "no URL from $*: $(cat "$log")" >&2; exit 1
}

web=$(start "$work/testbed.log" testbed --listen 127.0.0.1:0 --web-workers 1)
agent=$(start "$work/agent.log" agent --listen 127.0.0.1:0)

cat >"$work/cpu.yaml" <<EOF
name: cpu-bottleneck
target: {base_url: "$web"}
think_time: 500ms
requests:
  db: {path: "/db?web_ms=4&db_ms=1"}
servers:
  - {tier: web, agent: "$agent", processes: [tb-web], cores: 1}
  - {tier: db, agent: "$agent", processes: [tb-db], cores: 1}
capacity: {min_duration: 6s, window: 3s, p_max: 10}
EOF

echo "automatic analysis…"
"$bin" capacity "$work/cpu.yaml" --quiet --out "$work/auto" >/dev/null
echo "manual sweep 10..190 step 10…"
levels=$(seq -s, 10 10 190)
"$bin" capacity "$work/cpu.yaml" --levels "$levels" --duration "${SWEEP_DURATION:-10s}" \
    --quiet --out "$work/sweep" >/dev/null

python3 - "$work" <<'EOF'
import json, sys, math
from datetime import datetime
work = sys.argv[1]
def load(name):
    r = json.load(open(f"{work}/{name}/run.json"))
    pts = sorted((l["users"], l["throughput_rps"]) for l in r["levels"])
    t = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))
    secs = (t(r["finished_at"]) - t(r["started_at"])).total_seconds()
    return r, pts, secs
auto, a_pts, a_secs = load("auto")
sweep, s_pts, s_secs = load("sweep")
def interp(pts, u):
    for (u0, x0), (u1, x1) in zip(pts, pts[1:]):
        if u0 <= u <= u1:
            return x0 + (x1 - x0) * (u - u0) / (u1 - u0)
    return None
diffs = [(interp(a_pts, u) - x) / x for u, x in s_pts if interp(a_pts, u) is not None]
rms = math.sqrt(sum(d * d for d in diffs) / len(diffs))
a = auto["analysis"]
print(f"automatic: {len(a_pts)} levels in {a_secs:.0f} s; max {a['max_throughput_rps']:.1f}/s (true 250), "
      f"N* {a['n_star']} (true ~126), saturation {a['saturation_users']} users, stop {a['stop_reason']}")
print(f"sweep:     {len(s_pts)} levels in {s_secs:.0f} s; max {max(x for _, x in s_pts):.1f}/s")
print(f"levels ratio {len(a_pts)/len(s_pts):.2f}, time ratio {a_secs/s_secs:.2f}, "
      f"RMS relative difference of the curves {100*rms:.1f}% over {len(diffs)} sweep points")
EOF
echo "results: $work"
