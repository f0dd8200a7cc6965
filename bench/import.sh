#!/usr/bin/env bash
# Import of access logs: time and peak memory against the log's size, to
# show memory bounded by what the log holds at one time (open sessions,
# templates, a fixed sample per class), not by its length.
#
# The logs are drawn by tests/it/import.rs's generator (the six-class CBMG its
# accuracy test checks; 40 sessions/s, exponential think time of 12 s,
# robots, assets and malformed lines mixed in), written once under $WORK.
#
#   bash bench/import.sh                      # 100k, 1M and 3M lines, and 1M gzip
#   SIZES="1000000" bash bench/import.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-"100000 1000000 3000000"}
WORK=${WORK:-${TMPDIR:-/tmp}/autoperf-bench-import}
mkdir -p "$WORK"
cargo build --release --quiet
AUTOPERF=${AUTOPERF:-target/release/autoperf}

printf '%-22s %10s %9s %10s %12s %11s\n' log lines MB seconds "lines/s" "peak RSS MB"
for n in $SIZES; do
    log=$WORK/access-$n.log
    if [[ ! -s $log ]]; then
        AUTOPERF_BENCH_LOG=$log AUTOPERF_BENCH_LINES=$n \
            cargo test --release --quiet --test it -- --ignored import::write_a_log_for_the_benchmark >/dev/null
    fi
    files=("$log")
    if [[ $n == 1000000 ]]; then
        [[ -s $log.gz ]] || gzip -1 -c "$log" >"$log.gz"
        files+=("$log.gz")
    fi
    for f in "${files[@]}"; do
        out=$WORK/out-$(basename "$f").yaml
        /usr/bin/time -f '%e %M' -o "$WORK/time" "$AUTOPERF" import "$f" --out "$out" --force --quiet >/dev/null
        read -r secs kb <"$WORK/time"
        lines=$(grep -c '' "$log")
        printf '%-22s %10d %9.0f %10.2f %12.0f %11.1f\n' "$(basename "$f")" "$lines" \
            "$(($(stat -c %s "$f") / 1000000))" "$secs" "$(echo "$lines / $secs" | bc -l)" \
            "$(echo "$kb / 1024" | bc -l)"
    done
done
