#!/usr/bin/env bash
# The paper's comparison (AutoPerf 3.1.1): the automatic capacity analysis
# against a fine manual sweep of the same system, in the same run — once with
# the paper's bisection and once with the model-guided search (the default).
#
# Two testbed systems, think time exponential with mean 0.5 s:
#   cpu:  one web worker, /db?web_ms=4&db_ms=1: a CPU bottleneck, true
#         saturation throughput 250/s, N* ≈ 126. Sweep 10, 20, … 190 users.
#   lock: two web workers, POST /lock?ms=5: a global lock the agents cannot
#         see, 200/s at most, knee ≈ 101 users. Sweep 10, 20, … 160 users.
# Prints, per system and strategy: levels, time, max throughput, stop reason
# and the RMS relative difference of the automatic curve (interpolated
# linearly between its levels) from the sweep's points inside its range.
#
# And how many automatic levels lie inside their own 95% interval of the
# sweep's curve (`in CI`), and the time ratio to the sweep. The sweep
# includes 1 user, so the RMS judges the analysis's first level too.
#
#   bash bench/capacity-vs-sweep.sh                  # about 17 minutes on 2 cores
#   SYSTEMS=cpu SWEEP_DURATION=20s bash bench/capacity-vs-sweep.sh
#   SEARCHES=model SWEEP_DURATION=40s bash bench/capacity-vs-sweep.sh
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-target}/release/autoperf
work=$(mktemp -d /tmp/autoperf-sweep.XXXXXX)
. bench/lib.sh

agent=$(start "$work/agent.log" agent --listen 127.0.0.1:0)
cpu_web=$(start "$work/testbed-cpu.log" testbed --listen 127.0.0.1:0 --web-workers 1)
lock_web=$(start "$work/testbed-lock.log" testbed --listen 127.0.0.1:0 --web-workers 2)

cat >"$work/cpu.yaml" <<YAML
name: cpu-bottleneck
target: {base_url: "$cpu_web"}
think_time: {exponential: 500ms}
requests:
  db: {path: "/db?web_ms=4&db_ms=1"}
servers:
  - {tier: web, agent: "$agent", processes: [tb-web], cores: 1}
  - {tier: db, agent: "$agent", processes: [tb-db], cores: 1}
capacity: {min_duration: 6s, window: 3s, p_max: 10}
YAML

cat >"$work/lock.yaml" <<YAML
name: lock-bottleneck
target: {base_url: "$lock_web", timeout: 30s}
think_time: {exponential: 500ms}
requests:
  lock: {method: POST, path: "/lock?ms=5"}
servers:
  - {tier: web, agent: "$agent", processes: [tb-web]}
capacity: {min_duration: 6s, window: 3s, p_max: 10}
YAML

for system in ${SYSTEMS:-cpu lock}; do
    case $system in
        cpu) levels=1,$(seq -s, 10 10 190) ;;
        lock) levels=1,$(seq -s, 10 10 160) ;;
        *) echo "unknown system $system (cpu, lock)" >&2; exit 2 ;;
    esac
    for search in ${SEARCHES:-bisection model}; do
        echo "$system: automatic analysis, $search…"
        "$bin" capacity "$work/$system.yaml" --search "$search" --quiet \
            --out "$work/$system-$search" >/dev/null
    done
    echo "$system: manual sweep $levels…"
    "$bin" capacity "$work/$system.yaml" --levels "$levels" \
        --duration "${SWEEP_DURATION:-10s}" --quiet --out "$work/$system-sweep" >/dev/null
done

SEARCHES="${SEARCHES:-bisection model}" python3 - "$work" ${SYSTEMS:-cpu lock} <<'PY'
import json, os, sys, math
from datetime import datetime
work, systems = sys.argv[1], sys.argv[2:]
searches = os.environ["SEARCHES"].split()
def load(name):
    r = json.load(open(f"{work}/{name}/run.json"))
    pts = sorted((l["users"], l["throughput_rps"], l["requests"]) for l in r["levels"])
    # Each level's 95% half-width (req/s), when it has one.
    r["halves"] = {l["users"]: (l.get("ci95") or {}).get("throughput_rps") for l in r["levels"]}
    t = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))
    secs = (t(r["finished_at"]) - t(r["started_at"])).total_seconds()
    return r, pts, secs
def interp(pts, u):
    for (u0, x0, _), (u1, x1, _) in zip(pts, pts[1:]):
        if u0 <= u <= u1:
            return x0 + (x1 - x0) * (u - u0) / (u1 - u0)
    return None
# RMS: every sweep point alike. Weighted: each by its requests (the inverse
# variance of its throughput): a 10-user point of 200 requests is itself
# uncertain by 7% and should not decide a 5% comparison.
print(f"{'system':7} {'search':10} {'levels':>6} {'time':>6} {'max X/s':>8} {'RMS':>6} {'weighted':>8} {'ratio':>6} {'in CI':>6}  stop, levels run")
for system in systems:
    sweep, s_pts, s_secs = load(f"{system}-sweep")
    print(f"{system:7} {'sweep':10} {len(s_pts):6} {s_secs:5.0f}s {max(x for _, x, _ in s_pts):8.1f}")
    for search in searches:
        r, pts, secs = load(f"{system}-{search}")
        diffs = [((interp(pts, u) - x) / x, n) for u, x, n in s_pts if interp(pts, u) is not None]
        rms = math.sqrt(sum(d * d for d, _ in diffs) / len(diffs))
        wrms = math.sqrt(sum(n * d * d for d, n in diffs) / sum(n for _, n in diffs))
        a = r["analysis"]
        order = [c["users"] for c in a["levels_chosen"]]
        # Each automatic level against the sweep's curve there: inside its
        # own 95% interval?
        inside, judged, outside = 0, 0, []
        for u, x, _ in pts:
            at, half = interp(s_pts, u), r["halves"].get(u)
            if at is None or half is None:
                continue
            judged += 1
            if abs(x - at) <= half:
                inside += 1
            else:
                outside.append(f"{u}: {x:.1f}±{half:.1f} vs {at:.1f}")
        print(f"{system:7} {search:10} {len(pts):6} {secs:5.0f}s {a['max_throughput_rps']:8.1f} "
              f"{100 * rms:5.1f}% {100 * wrms:7.1f}% {secs / s_secs:6.2f} {inside:>3}/{judged:<2}  "
              f"{a['stop_reason']}, {order} ({len(diffs)} sweep points)")
        if outside:
            print(f"{'':18} outside their interval: {'; '.join(outside)}")
PY
echo "results: $work"
