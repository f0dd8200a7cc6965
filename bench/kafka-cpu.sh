#!/usr/bin/env bash
# The generator's CPU per Kafka record, this build against another
# (BASELINE), in paired rounds: both send the same open workload (100-byte
# records, evenly spaced, acks=1, no compression) at RATE for DURATION on
# one core, the broker pinned to another. Each round runs both, in
# alternating order; a round's figure is user + system CPU seconds of the
# whole process (start-up included, alike for both) per million records
# sent. Prints each round and the median ratio new/old.
#
# For changes to the per-record path (issue 36 item 5: the scheduler's
# clock once per tick) whose effect, a few percent, is inside one run's
# noise: only rounds side by side tell it.
#
#   BASELINE=/tmp/old/autoperf bash bench/kafka-cpu.sh     # about 4 minutes
#   ROUNDS=3 RATE=800000 BASELINE=… bash bench/kafka-cpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."

: "${BASELINE:?set BASELINE to the autoperf binary to compare against}"
rounds=${ROUNDS:-6}
rate=${RATE:-1200000}
duration=${DURATION:-6}
cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-target}/release/autoperf
work=$(mktemp -d /tmp/autoperf-kafka-cpu.XXXXXX)
. bench/lib.sh

bootstrap=$(bash scripts/kafka.sh start)
broker_pid=$(cat "${KAFKA_DIR:-target/kafka}/broker.pid")
bash scripts/pyenv.sh
py=target/pyenv/bin/python
# Each run writes about a gigabyte: the topic goes at the end.
drop_topic() {
    "$py" - "$bootstrap" <<'PY' || true
import sys
from confluent_kafka.admin import AdminClient
admin = AdminClient({"bootstrap.servers": sys.argv[1]})
for f in admin.delete_topics(["autoperf-kafka-cpu"], operation_timeout=30).values():
    f.result()
PY
}
# The broker on the first CPU, autoperf on the second; the broker back on
# every CPU at the end.
taskset -a -p -c 0 "$broker_pid" >/dev/null
trap 'taskset -a -p -c 0-$(($(nproc) - 1)) "$broker_pid" >/dev/null; drop_topic; cleanup' EXIT

cat >"$work/s.yaml" <<YAML
name: kafka-cpu
target:
  kafka: {bootstrap: "$bootstrap", acks: "1", settings: {compression.type: none}}
  timeout: 30s
think_time: 0s
arrivals: {rate: 1000/s, spacing: even}
requests:
  record:
    produce:
      topic: autoperf-kafka-cpu
      value: {raw: "$(head -c 100 /dev/zero | tr '\0' x)"}
YAML

# One run of binary $1 into $2; prints "cpu_seconds records".
one() {
    /usr/bin/time -f "%U %S" -o "$2.time" taskset -c 1 "$1" run "$work/s.yaml" \
        --rate "$rate/s" --max-in-flight 100000 --duration "${duration}s" --warmup 2s \
        --quiet --out "$2" >/dev/null 2>&1
    python3 - "$2" <<'PY'
import json, sys
d = sys.argv[1]
user, system = map(float, open(d + ".time").read().split())
lv = json.load(open(d + "/run.json"))["levels"][0]
print(f"{user + system:.3f} {lv['sessions']} {lv['errors']}")
PY
}

echo "round  old s/M  new s/M  new/old   ($rate records/s for ${duration}s + 2s warm-up, one core)"
for r in $(seq "$rounds"); do
    if ((r % 2)); then
        old=$(one "$BASELINE" "$work/old-$r"); new=$(one "$bin" "$work/new-$r")
    else
        new=$(one "$bin" "$work/new-$r"); old=$(one "$BASELINE" "$work/old-$r")
    fi
    echo "$r $old $new"
done | python3 -c '
import statistics, sys
ratios = []
for line in sys.stdin:
    r, oc, on, oe, nc, nn, ne = line.split()
    # Seconds per million records sent (the warm-up sends at the same rate).
    o, n = float(oc) / int(on) * 1e6, float(nc) / int(nn) * 1e6
    errors = int(oe) + int(ne)
    ratios.append(n / o)
    print(f"{r:>5}  {o:7.3f}  {n:7.3f}  {n / o:7.3f}" + (f"   ({errors} errors)" if errors else ""), flush=True)
print(f"median new/old: {statistics.median(ratios):.3f} over {len(ratios)} rounds; new lower in {sum(x < 1 for x in ratios)} of {len(ratios)}")
'
