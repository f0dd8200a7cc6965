#!/usr/bin/env python3
"""The Kafka tests' independent client: librdkafka through confluent-kafka's
Python binding (not autoperf's own client), in the venv of
`bash scripts/pyenv.sh`. The tests read back what autoperf produced and
manage topics with it; one JSON object on stdout, or a file of records.

    target/pyenv/bin/python scripts/kafka-client.py counts BOOTSTRAP TOPIC
        {"partitions": [n0, n1, ...]}: records in each partition (high - low watermark)
    target/pyenv/bin/python scripts/kafka-client.py consume BOOTSTRAP TOPIC GROUP PER_RECORD_US SECONDS
        a consumer group member taking PER_RECORD_US (asleep) per record,
        committing every 500 ms, for SECONDS: {"consumed": n}
    target/pyenv/bin/python scripts/kafka-client.py exists BOOTSTRAP TOPIC
        {"exists": true|false}, without making it
    target/pyenv/bin/python scripts/kafka-client.py dump BOOTSTRAP TOPIC FILE
        every record present when it starts, one JSON line each into FILE,
        {"p": partition, "k": key, "v": value} (base64, null when absent);
        stdout: {"partitions": N, "total": records present, "read": records read}
    target/pyenv/bin/python scripts/kafka-client.py create BOOTSTRAP TOPIC PARTITIONS
    target/pyenv/bin/python scripts/kafka-client.py grow BOOTSTRAP TOPIC PARTITIONS
        create a topic (replication 1) / add partitions up to PARTITIONS,
        waiting until the broker has done it: every partition has a leader

Exits 1 with the error on stderr when the broker refuses or a minute passes.
"""

import base64
import json
import sys
import time

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

TIMEOUT_S = 60


def consumer(bootstrap, topic):
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-check",
            "enable.auto.commit": False,
        }
    )


def watermarks(c, topic):
    metadata = c.list_topics(topic, timeout=10)
    partitions = sorted(metadata.topics[topic].partitions)
    return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in partitions]


def counts(bootstrap, topic):
    c = consumer(bootstrap, topic)
    try:
        return {"partitions": [high - low for low, high in watermarks(c, topic)]}
    finally:
        c.close()


def consume(bootstrap, topic, group, per_record_us, seconds):
    """A stream processor of known capacity: a member of consumer group
    `group` that takes `per_record_us` over each record of `topic` (so it
    keeps up with at most 1e6 / per_record_us records/s), its offsets
    committed every 500 ms, for `seconds`. It sleeps that time rather than
    spinning: its capacity holds on a busy machine, and a backlog does not
    take a core from the broker beside it."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 500,
        }
    )
    c.subscribe([topic])
    spend = per_record_us / 1e6
    end = time.monotonic() + seconds
    consumed = 0
    try:
        while time.monotonic() < end:
            for m in c.consume(num_messages=10, timeout=0.2):
                if m.error():
                    continue
                time.sleep(spend)
                consumed += 1
    finally:
        c.close()
    return {"consumed": consumed}


def b64(data):
    return None if data is None else base64.b64encode(data).decode()


def dump(bootstrap, topic, path):
    c = consumer(bootstrap, topic)
    marks = watermarks(c, topic)
    # Each partition from its beginning up to where it ended at the start.
    left = {p: high for p, (low, high) in enumerate(marks) if high > low}
    c.assign([TopicPartition(topic, p, low) for p, (low, _) in enumerate(marks)])
    read = 0
    give_up = time.monotonic() + TIMEOUT_S
    with open(path, "w") as out:
        while left and time.monotonic() < give_up:
            for m in c.consume(num_messages=10000, timeout=0.5):
                if m.error():
                    raise RuntimeError(str(m.error()))
                p = m.partition()
                if p not in left or m.offset() >= left[p]:
                    continue
                out.write(json.dumps({"p": p, "k": b64(m.key()), "v": b64(m.value())}) + "\n")
                read += 1
                if m.offset() + 1 >= left[p]:
                    del left[p]
    c.close()
    total = sum(high - low for low, high in marks)
    return {"partitions": len(marks), "total": total, "read": read}


def admin(bootstrap, topic, partitions, futures_of):
    client = AdminClient({"bootstrap.servers": bootstrap})
    for name, future in futures_of(client).items():
        future.result(timeout=TIMEOUT_S)
    # The controller has committed the change; the broker applies it a
    # moment later (seconds on a busy machine), and until then refuses the
    # partitions' records. Done when its metadata gives each a leader.
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        meta = client.list_topics(topic, timeout=10).topics.get(topic)
        led = [p for p in (meta.partitions.values() if meta else []) if p.error is None and p.leader >= 0]
        if meta is not None and meta.error is None and len(led) >= partitions:
            return {"done": True}
        if time.monotonic() > deadline:
            raise SystemExit(f"{topic}: {len(led)} of {partitions} partitions have a leader after {TIMEOUT_S} s")
        time.sleep(0.1)


def main(argv):
    command, bootstrap, topic, *rest = argv
    if command == "counts":
        result = counts(bootstrap, topic)
    elif command == "consume":
        result = consume(bootstrap, topic, rest[0], int(rest[1]), float(rest[2]))
    elif command == "exists":
        # Every topic listed: asking for one by name could make it.
        listed = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
        result = {"exists": topic in listed and listed[topic].error is None}
    elif command == "dump":
        result = dump(bootstrap, topic, rest[0])
    elif command == "create":
        n = int(rest[0])
        result = admin(
            bootstrap,
            topic,
            n,
            lambda a: a.create_topics(
                [NewTopic(topic, num_partitions=n, replication_factor=1)], operation_timeout=10
            ),
        )
    elif command == "grow":
        n = int(rest[0])
        result = admin(
            bootstrap,
            topic,
            n,
            lambda a: a.create_partitions([NewPartitions(topic, n)], operation_timeout=10),
        )
    else:
        raise SystemExit(f"kafka-client.py: unknown command {command!r}")
    print(json.dumps(result))


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Exception as e:  # noqa: BLE001 - the test shows whatever went wrong
        print(f"kafka-client.py {' '.join(sys.argv[1:])}: {e}", file=sys.stderr)
        sys.exit(1)
