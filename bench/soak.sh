#!/usr/bin/env bash
# Soak: hours at a steady moderate load against nginx on loopback, a closed
# and an open workload side by side, to show that autoperf leaks neither
# memory nor file descriptors and loses no second of its time series.
#
# Every SAMPLE seconds it reads each generator's RSS (VmRSS) and open files
# (/proc/PID/fd) into samples.csv. At the end, for each run:
#   - RSS and open files after warm-up: min, max, first and last ten-minute
#     medians; flat = the last ten minutes' median within 5% (FLAT_PCT) of
#     the first ten minutes' after warm-up: what a leak does, whereas the
#     spread (max over min, printed too) also counts passing bumps of a
#     busy allocator;
#   - timeseries.csv has one row for every second, none missing;
#   - run.json is complete (stop_reason completed) and report.html exists.
# Exits 1 when any of these fails.
#
#   bash bench/soak.sh                        # two hours (the issue's figure)
#   SECONDS_TOTAL=600 WARMUP_S=120 bash bench/soak.sh   # a ten-minute look
set -euo pipefail

SECONDS_TOTAL=${SECONDS_TOTAL:-7200}
WARMUP_S=${WARMUP_S:-600} # samples before this are not judged (allocator, pools)
SAMPLE=${SAMPLE:-10}
USERS=${USERS:-200}       # closed: 200 users x 100 ms think ~ 2,000 req/s
RATE=${RATE:-400}         # open: sessions per second (5 requests each ~ 2,000 req/s)
FLAT_PCT=${FLAT_PCT:-5}
HERE=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=bench/nginx.sh
source "$HERE/nginx.sh"
OUT=${OUT:-$WORK/soak}
mkdir -p "$OUT"

scenario() { # $1: name, $2: think time
    cat <<YAML
name: soak-$1
target: {base_url: "http://127.0.0.1:$PORT"}
think_time: {exponential: $2}
requests:
  small: {path: /100b.txt}
  page: {path: /4k.txt}
session:
  start: small
  transitions:
    small: {page: 0.5, small: 0.4}    # the rest ends the session
    page: {small: 0.6}
YAML
}
scenario closed 100ms >"$OUT/closed.yaml"
scenario open 1ms >"$OUT/open.yaml"

"$AUTOPERF" run "$OUT/closed.yaml" --users "$USERS" --duration "${SECONDS_TOTAL}s" --warmup 0s \
    --quiet --out "$OUT/closed" >"$OUT/closed.log" 2>&1 &
CLOSED=$!
"$AUTOPERF" run "$OUT/open.yaml" --rate "$RATE/s" --duration "${SECONDS_TOTAL}s" --warmup 0s \
    --quiet --out "$OUT/open" >"$OUT/open.log" 2>&1 &
OPEN=$!
trap 'kill $CLOSED $OPEN 2>/dev/null || true; stop_nginx' EXIT
echo "soak: ${SECONDS_TOTAL}s, closed $USERS users (pid $CLOSED), open $RATE/s (pid $OPEN), nginx :$PORT, results in $OUT" >&2

echo "t_s,run,rss_kb,fds" >"$OUT/samples.csv"
start=$(date +%s)
while kill -0 "$CLOSED" 2>/dev/null || kill -0 "$OPEN" 2>/dev/null; do
    t=$(($(date +%s) - start))
    for run in closed open; do
        pid=$([[ $run == closed ]] && echo "$CLOSED" || echo "$OPEN")
        rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
        fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
        [[ -n "$rss" ]] && echo "$t,$run,$rss,$fds" >>"$OUT/samples.csv"
    done
    sleep "$SAMPLE"
done
status=0
wait "$CLOSED" || { echo "closed run exited $?" >&2; status=1; }
wait "$OPEN" || { echo "open run exited $?" >&2; status=1; }

python3 - "$OUT" "$WARMUP_S" "$FLAT_PCT" "$SECONDS_TOTAL" <<'PY' || status=1
import csv, json, os, statistics, sys
out, warmup, flat_pct, total = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
rows = list(csv.DictReader(open(f"{out}/samples.csv")))
ok = True
print(f"{'run':6} {'what':9} {'min':>9} {'max':>9} {'first10':>9} {'last10':>9} {'spread':>7} {'drift':>7}  verdict")
for run in ("closed", "open"):
    mine = [r for r in rows if r["run"] == run and float(r["t_s"]) >= warmup]
    if not mine:
        print(f"{run}: no samples after warm-up"); ok = False; continue
    end = max(float(r["t_s"]) for r in mine)
    for key, what in (("rss_kb", "RSS kB"), ("fds", "open fds")):
        vals = [int(r[key]) for r in mine]
        first = statistics.median(int(r[key]) for r in mine if float(r["t_s"]) < warmup + 600)
        last = statistics.median(int(r[key]) for r in mine if float(r["t_s"]) > end - 600)
        spread = (max(vals) - min(vals)) / min(vals) * 100
        drift = (last - first) / first * 100
        good = abs(drift) <= flat_pct
        ok &= good
        print(f"{run:6} {what:9} {min(vals):9d} {max(vals):9d} {first:9.0f} {last:9.0f} {spread:6.2f}% {drift:+6.2f}%  {'flat' if good else 'NOT FLAT'}")
    series = list(csv.DictReader(open(f"{out}/{run}/timeseries.csv")))
    seconds = sorted({int(float(r["t_s"])) for r in series})
    missing = sorted(set(range(seconds[0], seconds[-1] + 1)) - set(seconds)) if seconds else []
    run_json = json.load(open(f"{out}/{run}/run.json"))
    level = (run_json.get("levels") or [{}])[0]
    complete = (run_json.get("analysis", {}).get("stop_reason") in (None, "completed")
                and run_json.get("stop_reason", "completed") == "completed"
                and os.path.exists(f"{out}/{run}/report.html") and level.get("requests", 0) > 0)
    span_ok = bool(seconds) and seconds[-1] - seconds[0] + 1 >= total - 2
    ok &= not missing and complete and span_ok
    print(f"{run:6} timeseries {len(seconds)} seconds ({seconds[0] if seconds else '-'}..{seconds[-1] if seconds else '-'}), "
          f"{len(missing)} missing{(' e.g. ' + str(missing[:5])) if missing else ''}; "
          f"{level.get('requests', 0)} requests, {level.get('errors', 0)} errors, "
          f"{level.get('throughput_rps', 0):.0f} req/s; results {'complete' if complete else 'INCOMPLETE'}")
print("soak:", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
exit $status
