#!/usr/bin/env bash
# Open-workload rate accuracy: achieved/target arrival rate against nginx on
# loopback, at 1,000/s and at 20, 40, 60 and 80% of the maximum throughput
# autoperf measures first (closed loop, 64 users, no think time).
#
#   bash bench/open-rate.sh
#   DURATION=20 bash bench/open-rate.sh
set -euo pipefail

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
HERE=$(cd "$(dirname "$0")" && pwd)

NGINX_CONNECTIONS=16000 NGINX_LISTEN="backlog=4096"
# shellcheck source=bench/nginx.sh
source "$HERE/nginx.sh"

cat >"$WORK/rate.yaml" <<YAML
name: rate
target: {base_url: "http://127.0.0.1:$PORT"}
think_time: 0s
requests:
  get: {path: /100b.txt}
session:
  start: get
YAML

# Prints one level's figures as JSON: target, achieved, throughput, errors,
# late and unstarted arrivals, p99 from the intended start.
level() {
    python3 - "$1/run.json" <<'PY'
import json, sys
lv = json.load(open(sys.argv[1]))["levels"][0]
print(json.dumps({k: lv.get(k) for k in
    ("rate_rps", "achieved_rate_rps", "throughput_rps", "errors")} |
    {"p99_ms": lv["response_time_ms"]["p99"],
     "queued": (lv.get("arrivals") or {}).get("queued"),
     "unstarted": (lv.get("arrivals") or {}).get("unstarted")}))
PY
}

"$AUTOPERF" run "$WORK/rate.yaml" --users 64 --duration "${DURATION}s" --warmup "${WARMUP}s" \
    --quiet --out "$WORK/max" >/dev/null
MAX=$(python3 -c "import json; print(json.load(open('$WORK/max/run.json'))['levels'][0]['throughput_rps'])")
echo "maximum throughput (64 users, closed loop): $MAX req/s"
: >"$WORK/rows"
for target in 1000 $(python3 -c "print(' '.join(str(round($MAX * f)) for f in (0.2, 0.4, 0.6, 0.8)))"); do
    "$AUTOPERF" run "$WORK/rate.yaml" --rate "$target/s" --arrivals even --duration "${DURATION}s" \
        --warmup "${WARMUP}s" --quiet --out "$WORK/r$target" >/dev/null
    echo "$target $(level "$WORK/r$target")" >>"$WORK/rows"
done
python3 - "$WORK/rows" "$MAX" <<'PY'
import json, sys
mx = float(sys.argv[2])
print(f"\n{'target/s':>9} {'% of max':>8} {'achieved/s':>11} {'ratio':>7} {'errors':>6} {'p99 ms':>8} {'queued':>7} {'unstarted':>9}")
for line in open(sys.argv[1]):
    target, rest = line.split(" ", 1)
    r = json.loads(rest)
    ach = r["achieved_rate_rps"] or 0
    print(f"{float(target):9.0f} {float(target) / mx * 100:7.0f}% {ach:11.1f} {ach / float(target):7.4f} "
          f"{r['errors']:6d} {r['p99_ms']:8.2f} {r['queued'] or 0:7d} {r['unstarted'] or 0:9d}")
PY
