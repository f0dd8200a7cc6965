#!/usr/bin/env python3
"""An independent check of what a Kafka producer wrote: consumes a topic from
the beginning with the confluent-kafka Python consumer (librdkafka, not
autoperf's client) and decodes every value with Confluent's own
schema-registry-aware AvroDeserializer, pointed at a registry (the project's
stub: `autoperf testbed --schema-registry ADDR`, or
`autoperf_testbed::registry::serve` in a test).

Set up once (idempotent; tests and scripts/test.sh call it):

    bash scripts/pyenv.sh            # venv in target/pyenv with confluent-kafka[avro,schemaregistry]

Verify (the records present when it starts; exits 0 only if all decode and
every expectation holds):

    target/pyenv/bin/python scripts/kafka-verify.py \\
        --bootstrap 127.0.0.1:19092 --registry http://127.0.0.1:18081 --topic input \\
        [--expect-count N | --min-count N] [--fields identifier,timestamp,valueInW] \\
        [--key-field identifier] [--murmur2] [--samples 3] [--timeout 60]

It prints one JSON object on stdout:

    {"topic": "input", "count": 1000, "distinct_keys": 100, "partitions": {"0": 260, …},
     "schema_ids": [1], "samples": [{"key": "s_1", "partition": 2, "offset": 0, "value": {…}}],
     "failures": 0, "failure_samples": [], "problems": []}

`failures` counts records that did not decode (wrong magic byte, unknown
schema id, bad Avro); `problems` lists every unmet expectation in words.
--key-field checks that each record's key equals that field of its value;
--murmur2 that each keyed record sits on the partition Java's default
partitioner picks (murmur2 of the key bytes, positive, modulo the partition
count).

To produce sample records with Confluent's AvroSerializer (it registers the
schema under TOPIC-value, as producers do), for testing a registry or this
script:

    target/pyenv/bin/python scripts/kafka-verify.py produce \\
        --bootstrap … --registry … --topic t --count 100 [--sensors 10]
"""

import argparse
import json
import struct
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

# Theodolite's sensor record, the schema `produce` writes.
ACTIVE_POWER_RECORD = json.dumps(
    {
        "type": "record",
        "name": "ActivePowerRecord",
        "namespace": "titan.ccp.model.records",
        "fields": [
            {"name": "identifier", "type": "string"},
            {"name": "timestamp", "type": "long"},
            {"name": "valueInW", "type": "double"},
        ],
    }
)


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (the Java client's default partitioner), as a
    signed 32-bit int."""
    length = len(data)
    seed = 0x9747B28C
    m = 0x5BD1E995
    r = 24
    h = (seed ^ length) & 0xFFFFFFFF
    for i in range(length // 4):
        k = struct.unpack_from("<I", data, i * 4)[0]
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length & ~3
    rest = length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def java_partition(key: bytes, partitions: int) -> int:
    # Utils.toPositive: clears the sign bit, it does not take abs().
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def verify(args) -> int:
    registry = SchemaRegistryClient({"url": args.registry})
    deserializer = AvroDeserializer(registry)
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": f"kafka-verify-{time.time_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # Read-committed would hide nothing here, and uncommitted is
            # what a plain producer writes.
            "isolation.level": "read_uncommitted",
        }
    )
    problems = []
    metadata = consumer.list_topics(args.topic, timeout=args.timeout)
    topic = metadata.topics.get(args.topic)
    if topic is None or topic.error is not None or not topic.partitions:
        why = topic.error if topic is not None else "not in the metadata"
        print(json.dumps({"topic": args.topic, "count": 0, "problems": [f"no topic {args.topic}: {why}"]}))
        return 1
    partition_count = len(topic.partitions)
    # Only the records present now: a bounded read that ends by itself.
    starts, ends = {}, {}
    for p in topic.partitions:
        low, high = consumer.get_watermark_offsets(TopicPartition(args.topic, p), timeout=args.timeout)
        if high > low:
            starts[p], ends[p] = low, high
    # Assigned, not subscribed: no group rebalance to wait for.
    consumer.assign([TopicPartition(args.topic, p, starts[p]) for p in ends])

    count = 0
    keys = set()
    per_partition = {p: 0 for p in sorted(topic.partitions)}
    schema_ids = set()
    samples = []
    failures = 0
    failure_samples = []
    key_mismatches = 0
    field_mismatches = 0
    partition_mismatches = 0
    deadline = time.monotonic() + args.timeout
    remaining = dict(ends)
    while remaining and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            problems.append(f"consumer error: {msg.error()}")
            break
        p, offset = msg.partition(), msg.offset()
        if p in remaining and offset >= remaining[p] - 1:
            del remaining[p]
        if p not in ends or offset >= ends[p]:
            continue
        count += 1
        per_partition[p] += 1
        raw_key = msg.key()
        key = raw_key.decode("utf-8", "replace") if raw_key is not None else None
        keys.add(key)
        value = msg.value() or b""
        try:
            # The wire header, read here too so a failure says what it held.
            if len(value) < 5 or value[0] != 0:
                raise ValueError(f"no schema-registry header (first bytes {value[:5].hex()})")
            schema_ids.add(struct.unpack_from(">I", value, 1)[0])
            record = deserializer(value, SerializationContext(args.topic, MessageField.VALUE))
        except Exception as e:  # noqa: BLE001 — every failure is counted, whatever its kind
            failures += 1
            if len(failure_samples) < args.samples:
                failure_samples.append({"partition": p, "offset": offset, "key": key, "error": f"{type(e).__name__}: {e}"})
            continue
        if args.fields is not None and (not isinstance(record, dict) or sorted(record) != sorted(args.fields)):
            field_mismatches += 1
        if args.key_field is not None and (not isinstance(record, dict) or record.get(args.key_field) != key):
            key_mismatches += 1
        if args.murmur2 and raw_key is not None and java_partition(raw_key, partition_count) != p:
            partition_mismatches += 1
        if len(samples) < args.samples:
            samples.append({"key": key, "partition": p, "offset": offset, "value": record})
    consumer.close()

    if remaining:
        problems.append(f"timed out after {args.timeout}s with partitions {sorted(remaining)} unread to their end")
    if failures:
        problems.append(f"{failures} records did not decode")
    if count == 0:
        problems.append("no records")
    if args.expect_count is not None and count != args.expect_count:
        problems.append(f"expected {args.expect_count} records, read {count}")
    if args.min_count is not None and count < args.min_count:
        problems.append(f"expected at least {args.min_count} records, read {count}")
    if field_mismatches:
        problems.append(f"{field_mismatches} records lack exactly the fields {args.fields}")
    if key_mismatches:
        problems.append(f"{key_mismatches} records' keys differ from their {args.key_field}")
    if partition_mismatches:
        problems.append(f"{partition_mismatches} records are not on murmur2(key)'s partition of {partition_count}")
    summary = {
        "topic": args.topic,
        "count": count,
        "distinct_keys": len(keys),
        "partitions": {str(p): n for p, n in per_partition.items()},
        "schema_ids": sorted(schema_ids),
        "samples": samples,
        "failures": failures,
        "failure_samples": failure_samples,
        "problems": problems,
    }
    print(json.dumps(summary, default=str))
    return 1 if problems else 0


def produce(args) -> int:
    registry = SchemaRegistryClient({"url": args.registry})
    serializer = AvroSerializer(registry, ACTIVE_POWER_RECORD)
    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "all", "partitioner": "murmur2_random"})
    errors = []

    def delivered(err, _msg):
        if err is not None:
            errors.append(str(err))

    for i in range(args.count):
        sensor = f"s_{i % args.sensors}"
        value = serializer(
            {"identifier": sensor, "timestamp": int(time.time() * 1000), "valueInW": i / 10},
            SerializationContext(args.topic, MessageField.VALUE),
        )
        producer.produce(args.topic, key=sensor.encode(), value=value, on_delivery=delivered)
        producer.poll(0)
    left = producer.flush(args.timeout)
    print(json.dumps({"produced": args.count, "undelivered": left, "errors": errors[: args.samples]}))
    return 1 if left or errors else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", nargs="?", choices=["verify", "produce"], default="verify")
    parser.add_argument("--bootstrap", default="127.0.0.1:19092")
    parser.add_argument("--registry", required=True, help="the schema registry's URL")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds the whole read may take")
    parser.add_argument("--samples", type=int, default=3, help="decoded records (and failures) to show")
    parser.add_argument("--expect-count", type=int)
    parser.add_argument("--min-count", type=int)
    parser.add_argument("--fields", type=lambda s: s.split(","), help="the exact field names each value must have")
    parser.add_argument("--key-field", help="the value's field each record's key must equal")
    parser.add_argument("--murmur2", action="store_true", help="check keys sit on Java's default partition")
    parser.add_argument("--count", type=int, default=100, help="produce: records to send")
    parser.add_argument("--sensors", type=int, default=10, help="produce: distinct keys")
    args = parser.parse_args()
    return produce(args) if args.mode == "produce" else verify(args)


if __name__ == "__main__":
    sys.exit(main())
