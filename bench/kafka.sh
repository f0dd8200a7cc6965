#!/usr/bin/env bash
# autoperf's Kafka producer against Java's ProducerPerformance (kafka-tools,
# same release as the broker) on the local broker, side by side in one run;
# then the SLO search of the load-generator comparison: the highest rate per
# core at which ≥ 95% of the configured rate arrives.
#
#   bash bench/kafka.sh                         # 3 rounds per case, then the SLO search
#   ROUNDS=1 SLO=0 bash bench/kafka.sh          # quicker, comparison only
#   CASES="" bash bench/kafka.sh                # the SLO search only
#   AUTOPERF=/path/to/autoperf bash bench/kafka.sh
#   CODEC=lz4 SECURITY=sasl_ssl LINGER=5 BATCH=262144 CASES="theodolite:all" SLO=0 bash bench/kafka.sh
#
# CODEC (compression.type), SECURITY (plaintext, or sasl_ssl: the broker's
# SASL_SSL listener with SCRAM-SHA-512 over TLS), LINGER (linger.ms) and
# BATCH (batch.size) apply to both producers alike; unset, each keeps its
# default.
#
# Cases: 100-byte values without key, and Theodolite ActivePowerRecords
# (Avro, schema-registry wire format, keyed by sensor id), each at acks=1
# and acks=all. The broker (scripts/kafka.sh, its own port) is pinned to
# core $BROKER_CPU and each generator in turn to core $GEN_CPU; the order of
# the two generators alternates from round to round, and every run gets a
# freshly created topic of $PARTITIONS partitions, so the broker's end
# offsets count exactly what arrived. See bench/README.md.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
PARTITIONS=${PARTITIONS:-4}
BROKER_CPU=${BROKER_CPU:-0}
GEN_CPU=${GEN_CPU:-1}
# autoperf's maximum (MAX_MODE):
#   search (default): the highest fixed rate it sustains, found per case and
#     round from Java's rate in the same round by autoperf's own open search
#     (`autoperf capacity`): open workload, evenly spaced arrivals; a rate is
#     sustained when >= 97% of it is acknowledged in the measured window with
#     no error. Up from 1.5x Java's rate by 1.4x steps until one fails, then
#     bisection until the bracket is within 5%.
#   closed: USERS producers without think time, each waiting for its
#     acknowledgement.
#   open: one open-workload run at OVERLOAD_RATE, far above what it can do.
MAX_MODE=${MAX_MODE:-search}
USERS=${USERS:-20000}
OVERLOAD_RATE=${OVERLOAD_RATE:-8000000}
SEARCH_DURATION=${SEARCH_DURATION:-5}
# Open workloads: at rate R with acknowledgements taking L, R·L records are
# in flight; 100,000 covers 4,000,000/s at 25 ms.
MAX_IN_FLIGHT=${MAX_IN_FLIGHT:-100000}
SLO=${SLO:-1}
SLO_DURATION=${SLO_DURATION:-10}
CASES=${CASES-"100b:1 100b:all theodolite:1 theodolite:all"}
CODEC=${CODEC:-none}
SECURITY=${SECURITY:-plaintext}
LINGER=${LINGER:-}
BATCH=${BATCH:-}
# Its own broker: the tests' (19092) may be running and must not be measured.
export KAFKA_PORT=${KAFKA_PORT:-19292}
BOOTSTRAP=127.0.0.1:$KAFKA_PORT
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
PY="$ROOT/target/pyenv/bin/python"

if [[ -z "${AUTOPERF:-}" ]]; then
    (cd "$ROOT" && cargo build --release --quiet --bin autoperf)
    AUTOPERF="${CARGO_TARGET_DIR:-$ROOT/target}/release/autoperf"
fi
bash "$ROOT/scripts/pyenv.sh"
CLASSPATH_JARS=$(bash "$ROOT/scripts/kafka.sh" classpath)
bash "$ROOT/scripts/kafka.sh" start >/dev/null
WORK=$(mktemp -d /tmp/autoperf-kafka-bench.XXXXXX)
cleanup() {
    bash "$ROOT/scripts/kafka.sh" stop || true
    rm -rf "$WORK"
}
trap cleanup EXIT
BROKER_PID=$(cat "${KAFKA_DIR:-$ROOT/target/kafka-$KAFKA_PORT}/broker.pid")

# The producers' settings, alike for both: autoperf's as a YAML flow map's
# entries, Java's as --producer-props words. Topics are made and counted
# over the plaintext listener either way.
declare -A SEC
while IFS='=' read -r k v; do SEC[$k]=$v; done < <(bash "$ROOT/scripts/kafka.sh" security)
GEN_BOOTSTRAP=$BOOTSTRAP
AP_SETTINGS="compression.type: $CODEC"
JAVA_PROPS=("compression.type=$CODEC")
if [[ -n $LINGER ]]; then AP_SETTINGS+=", linger.ms: $LINGER"; JAVA_PROPS+=("linger.ms=$LINGER"); fi
if [[ -n $BATCH ]]; then AP_SETTINGS+=", batch.size: $BATCH"; JAVA_PROPS+=("batch.size=$BATCH"); fi
case $SECURITY in
    plaintext) ;;
    sasl_ssl)
        GEN_BOOTSTRAP=${SEC[SASL_SSL]}
        AP_SETTINGS+=", security.protocol: SASL_SSL, ssl.ca.location: '${SEC[CA]}', sasl.mechanism: SCRAM-SHA-512, sasl.username: ${SEC[USER]}, sasl.password: ${SEC[PASSWORD]}"
        JAVA_PROPS+=(security.protocol=SASL_SSL sasl.mechanism=SCRAM-SHA-512 ssl.truststore.type=PEM
            "ssl.truststore.location=${SEC[CA]}"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"${SEC[USER]}\" password=\"${SEC[PASSWORD]}\";")
        ;;
    *) echo "SECURITY is plaintext or sasl_ssl" >&2; exit 2 ;;
esac

# Pins the broker, every thread of it, to a CPU list.
pin_broker() { taskset -a -p -c "$1" "$BROKER_PID" >/dev/null; }

# A fresh, empty topic; prints nothing.
fresh_topic() {
    "$PY" - "$BOOTSTRAP" "$1" "$PARTITIONS" <<'PY'
import sys, time
from confluent_kafka.admin import AdminClient, NewTopic
bootstrap, topic, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
admin = AdminClient({"bootstrap.servers": bootstrap})
if topic in admin.list_topics(timeout=30).topics:
    for f in admin.delete_topics([topic], operation_timeout=30).values():
        f.result()
    # Deletion completes asynchronously on the broker.
    for _ in range(300):
        if topic not in admin.list_topics(timeout=30).topics:
            break
        time.sleep(0.1)
for _ in range(100):
    try:
        for f in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30).values():
            f.result()
        break
    except Exception as e:  # "marked for deletion" until the delete has finished
        if "TOPIC_ALREADY_EXISTS" not in str(e) and "marked for deletion" not in str(e):
            raise
        time.sleep(0.2)
PY
}

# Records on the broker: the sum of the topic's end offsets.
arrived() {
    "$PY" - "$BOOTSTRAP" "$1" <<'PY'
import sys
from confluent_kafka import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "bench-count"})
md = c.list_topics(sys.argv[2], timeout=30).topics[sys.argv[2]]
print(sum(c.get_watermark_offsets(TopicPartition(sys.argv[2], p), timeout=30)[1] for p in md.partitions))
c.close()
PY
}

# The value size of a Theodolite record as autoperf writes it: 5-byte header,
# identifier "s_NNNN" (length byte + 6), timestamp in ms (6-byte zigzag
# varint today), double (8).
THEODOLITE_BYTES=26

scenario() { # kind acks topic -> path
    local kind=$1 acks=$2 topic=$3 file="$WORK/$1-$2.yaml"
    {
        cat <<YAML
name: kafka-bench-$kind
target:
  kafka: {bootstrap: "$GEN_BOOTSTRAP", acks: "$acks", settings: {$AP_SETTINGS}}
  timeout: 30s
think_time: 0s
arrivals:
  rate: 1000/s
  spacing: even
YAML
        if [[ $kind == 100b ]]; then
            cat <<YAML
requests:
  record:
    produce:
      topic: $topic
      value: {raw: "$(head -c 100 /dev/zero | tr '\0' x)"}
YAML
        else
            cat <<YAML
data:
  sensors: {range: [0, 9999]}
requests:
  record:
    produce:
      topic: $topic
      key: "s_\${sensors.n}"
      value:
        avro:
          schema:
            type: record
            name: ActivePowerRecord
            namespace: titan.ccp.model.records
            fields:
              - {name: identifier, type: string}
              - {name: timestamp, type: long}
              - {name: valueInW, type: double}
          schema_id: 1
          record:
            identifier: "s_\${sensors.n}"
            timestamp: "\${now_ms()}"
            valueInW: "\${random(0.0, 100.0)}"
YAML
        fi
    } >"$file"
    echo "$file"
}

# autoperf on CPUS, open workload at RATE/s or closed with "users:N"
#   -> "acked_per_s errors arrived_on_broker cpu_cores unstarted_arrivals"
run_autoperf() { # kind acks rate|users:N cpus
    local topic="bench-$1" out="$WORK/ap-out" load
    if [[ $3 == users:* ]]; then
        load=(--users "${3#users:}")
    else
        load=(--rate "$3/s" --max-in-flight "$MAX_IN_FLIGHT")
    fi
    fresh_topic "$topic"
    rm -rf "$out"
    taskset -c "$4" "$AUTOPERF" run "$(scenario "$1" "$2" "$topic")" "${load[@]}" \
        --duration "${DURATION}s" --warmup "${WARMUP}s" \
        --quiet --out "$out" >"$WORK/ap.log" 2>&1 || {
        echo "autoperf failed:" >&2
        tail -20 "$WORK/ap.log" >&2
        echo "0 1 0 0 0"
        return
    }
    local n
    n=$(arrived "$topic")
    "$PY" - "$out/run.json" "$n" <<'PY'
import json, sys
lv = json.load(open(sys.argv[1]))["levels"][0]
unstarted = (lv.get("arrivals") or {}).get("unstarted", 0)
print(f"{lv['throughput_rps']:.0f} {lv['errors']} {sys.argv[2]} {lv['client']['cpu_util_cores']:.2f} {unstarted}")
PY
}

# ProducerPerformance sends a fixed count: the first run of a case sends
# PP_RECORDS, later ones what lasts WARMUP + DURATION at the rate the previous
# run reached. The first WARMUP seconds' worth are its --warmup-records, left
# out of the steady-state line that is read, as autoperf leaves out its
# warm-up: the JIT compiles the producer meanwhile.
PP_RECORDS=${PP_RECORDS:-1000000}
# Java ProducerPerformance, as fast as it goes, on CPUS -> "records_per_s errors arrived"
run_java() { # kind acks cpus
    local topic="bench-$1" size=100 count_file="$WORK/pp-count-$1-$2" count warm
    [[ $1 == theodolite ]] && size=$THEODOLITE_BYTES
    read -r count warm < <(cat "$count_file" 2>/dev/null || echo "$PP_RECORDS $((PP_RECORDS / 5))")
    fresh_topic "$topic"
    taskset -c "$3" java -Xmx1g -cp "$CLASSPATH_JARS" -Dlog4j2.level=WARN \
        org.apache.kafka.tools.ProducerPerformance --topic "$topic" \
        --num-records "$count" --warmup-records "$warm" --record-size "$size" --throughput -1 \
        --producer.config "$WORK/producer.properties" \
        --producer-props "bootstrap.servers=$GEN_BOOTSTRAP" "acks=$2" >"$WORK/pp.log" 2>&1 || true
    local n
    n=$(arrived "$topic")
    "$PY" - "$WORK/pp.log" "$n" "$count" "$count_file" "$WARMUP" "$DURATION" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
# "N records sent, R records/sec …" for the whole run, then
# "N steady state records sent, R records/sec …" after the warm-up records.
m = re.findall(r"(\d+)( steady state)? records sent, ([\d.]+) records/sec", text)
steady = [x for x in m if x[1]] or m
if not steady:
    sys.stderr.write("ProducerPerformance printed no summary:\n" + text[-2000:] + "\n")
    print("0 1 0")
else:
    rate = float(steady[-1][2])
    warm, secs = float(sys.argv[5]), float(sys.argv[6])
    count = max(100000, int(rate * (warm + secs)))
    open(sys.argv[4], "w").write(f"{count} {int(rate * warm)}")
    print(f"{rate:.0f} {int(sys.argv[3]) - int(sys.argv[2])} {sys.argv[2]}")
PY
}

# The highest rate autoperf sustains (open workload, evenly spaced) on CPUS,
# found by autoperf's own open-workload search (`autoperf capacity` on a
# scenario with `arrivals:`): up from START by 1.4x until a rate fails, then
# bisection until the bracket is within PRECISION percent; a rate passes when
# >= PERCENT of it is acknowledged with no error (`error_rate <= 0%`).
#   -> "acked_per_s errors acked cpu_cores unstarted_arrivals rate" of the
#      highest passing level, and the search's stop reason
search_rate() { # kind acks cpus start percent precision
    local topic="bench-$1" out="$WORK/search-out" file
    fresh_topic "$topic"
    rm -rf "$out"
    file=$(scenario "$1" "$2" "$topic")
    sed -i "s/^  spacing: even$/  spacing: even\n  max_in_flight: $MAX_IN_FLIGHT/" "$file"
    cat >>"$file" <<YAML
thresholds: ["error_rate <= 0%"]
capacity: {min_duration: ${DURATION}s, max_duration: $((3 * DURATION))s, rate_factor: 1.4, rate_precision: ${6}%, min_achieved: ${5}%}
YAML
    taskset -c "$3" "$AUTOPERF" capacity "$file" --rate "$4/s" --quiet --out "$out" >"$WORK/search.log" 2>&1 || {
        echo "autoperf capacity failed:" >&2
        tail -20 "$WORK/search.log" >&2
        echo "0 1 0 0 0 0 failed"
        return
    }
    "$PY" - "$out/run.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
a = run["analysis"]
for lv in run["levels"]:
    j = lv.get("rate_search") or {}
    rec = (lv.get("per_request") or {}).get("record") or {}
    sent, written = rec.get("body_bytes") or 0, rec.get("decoded_bytes") or 0
    ratio = f", {written / sent:.2f}x compressed" if sent else ""
    sys.stderr.write(f"    {lv['rate_rps']:.0f}/s -> {lv['throughput_rps']:.0f} acked/s, {j.get('verdict')}, {lv['client']['cpu_util_cores']:.2f} cores{ratio}\n")
best = a.get("max_passing_rate_rps")
lv = next((l for l in run["levels"] if best is not None and l["rate_rps"] == best), None)
if lv is None:
    print(f"0 1 0 0 0 0 {a['stop_reason']}")
else:
    unstarted = (lv.get("arrivals") or {}).get("unstarted", 0)
    print(f"{lv['throughput_rps']:.0f} {lv['errors']} {lv['throughput_rps']:.0f} {lv['client']['cpu_util_cores']:.2f} {unstarted} {best:.0f} {a['stop_reason']}")
PY
}

# autoperf's maximum for the comparison: searched from 1.5x Java's rate,
# 97% acknowledged, the bracket within 5% (about 3 bisections of a 1.4x step).
max_autoperf() { # kind acks cpus java_rate
    local DURATION=$SEARCH_DURATION
    search_rate "$1" "$2" "$3" $(( $4 * 3 / 2 )) 97 5
}

echo "broker $BOOTSTRAP (pid $BROKER_PID) on core $BROKER_CPU, generators on core $GEN_CPU, $PARTITIONS partitions"
echo "producers to $GEN_BOOTSTRAP ($SECURITY): autoperf {$AP_SETTINGS}; java ${JAVA_PROPS[*]}"
# A file, not --producer-props: ProducerPerformance splits those at every
# `=`, and sasl.jaas.config holds some.
printf '%s\n' "${JAVA_PROPS[@]}" >"$WORK/producer.properties"
case $MAX_MODE in
    open) MAX_LOAD=$OVERLOAD_RATE ;;
    closed) MAX_LOAD=users:$USERS ;;
    search) MAX_LOAD="highest sustained rate, ${SEARCH_DURATION}s per step" ;;
    *) echo "MAX_MODE is search, open or closed" >&2; exit 2 ;;
esac
echo "autoperf: $AUTOPERF ($MAX_MODE: ${MAX_LOAD}, ${WARMUP}s warm-up + ${DURATION}s)"
echo "java:     org.apache.kafka.tools.ProducerPerformance --throughput -1, first --num-records $PP_RECORDS, then ${WARMUP}s + ${DURATION}s worth, the first ${WARMUP}s as --warmup-records"
pin_broker "$BROKER_CPU"
RESULTS="$WORK/results.txt"
: >"$RESULTS"
for case in $CASES; do
    kind=${case%%:*} acks=${case##*:}
    # Not reported: sizes ProducerPerformance's runs to the duration, and
    # gives both the broker's and the JVM's first-run costs somewhere to go.
    java_rate=$(run_java "$kind" "$acks" "$GEN_CPU")
    java_rate=${java_rate%% *}
    for round in $(seq "$ROUNDS"); do
        if ((round % 2)); then order="java autoperf"; else order="autoperf java"; fi
        for tool in $order; do
            if [[ $tool == java ]]; then
                r=$(run_java "$kind" "$acks" "$GEN_CPU")
                java_rate=${r%% *}
            else
                if [[ $MAX_MODE == search ]]; then
                    r=$(max_autoperf "$kind" "$acks" "$GEN_CPU" "${java_rate:-0}")
                else
                    r=$(run_autoperf "$kind" "$acks" "$MAX_LOAD" "$GEN_CPU")
                fi
            fi
            echo "$kind acks=$acks $round $tool $r" | tee -a "$RESULTS"
        done
    done
done

"$PY" - "$RESULTS" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def mmm(xs):
    return f"{min(xs):10.0f} {statistics.median(xs):10.0f} {max(xs):10.0f}" if xs else "-"
print("\nrecords/s on one core (min / median / max over rounds); errors = records not acknowledged")
for case in dict.fromkeys((r[0], r[1]) for r in rows):
    by = lambda tool: {int(r[2]): r for r in rows if (r[0], r[1]) == case and r[3] == tool}
    j, a = by("java"), by("autoperf")
    rounds = sorted(set(j) & set(a))
    jr = [float(j[i][4]) for i in rounds]; ar = [float(a[i][4]) for i in rounds]
    ratios = [x / y for x, y in zip(ar, jr) if y > 0]
    print(f"\n{case[0]} {case[1]}:               min        med        max")
    print(f"  java       rec/s  {mmm(jr)}")
    print(f"  autoperf   rec/s  {mmm(ar)}")
    if ratios:
        print(f"  ratio autoperf/java {min(ratios):8.2f} {statistics.median(ratios):10.2f} {max(ratios):10.2f}   (same round)")
    errs = [r for r in rows if (r[0], r[1]) == case and r[5] != "0"]
    if errs:
        print(f"  WARNING: errors in {len(errs)} runs: {errs}")
PY

[[ $SLO == 1 ]] || exit 0

# The SLO search: the highest configured rate of which >= 95% is
# acknowledged, with no errors (autoperf's open search, from 1,000,000/s).
slo_search() { # cpus -> highest passing rate and the stop reason
    local DURATION=$SLO_DURATION r
    r=$(search_rate theodolite all "$1" 1000000 95 2)
    read -r _ _ _ _ _ rate stop <<<"$r"
    echo "$rate $stop"
}

echo
echo "SLO search, Theodolite records, acks=all: highest rate with >= 95% acknowledged"
echo "(1 core: autoperf on core $GEN_CPU, broker on core $BROKER_CPU; 2 cores: both share cores 0-1)"
read -r one one_stop < <(slo_search "$GEN_CPU")
pin_broker 0-1
read -r two two_stop < <(slo_search 0-1)
echo "  1 core:  $one records/s per core (search stopped: $one_stop)"
echo "  2 cores: $two records/s, $((two / 2)) per core, the broker sharing them (search stopped: $two_stop)"
