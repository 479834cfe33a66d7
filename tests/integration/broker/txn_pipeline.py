"""A consume-transform-produce loop with exactly-once semantics, run as its
own process by the transaction tests (so that they can kill -9 it).

    python -m tests.integration.broker.txn_pipeline BOOTSTRAP IN OUT GROUP TXN_ID

Reads ``IN`` in group ``GROUP`` (read_committed), writes ``out-<value>`` to
``OUT`` with the input's key, and commits the consumed offsets in the same
transaction (send_offsets_to_transaction), a batch of up to 25 records per
transaction. Exits 0 once the group's committed offsets reach the end of
``IN``. An abortable error aborts the transaction and rewinds to the
committed offsets (as does any other failed transaction); a fatal one
(fenced) exits 3.
"""

from __future__ import annotations

import logging
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

_quiet = logging.getLogger("txn-pipeline")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False

BATCH = 25


def _rewind(consumer: Consumer) -> None:
    assignment = consumer.assignment()
    if not assignment:
        return
    for tp in consumer.committed(assignment, timeout=10):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))


def _done(consumer: Consumer, topic: str) -> bool:
    meta = consumer.list_topics(topic, timeout=10).topics[topic]
    tps = [TopicPartition(topic, p) for p in meta.partitions]
    committed = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}
    for p in meta.partitions:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        if committed.get(p, -1) < high:
            return False
    return True


def main(bootstrap: str, source: str, sink: str, group: str, txn_id: str) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 2000,
            "log_level": 0,
            "logger": _quiet,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 10_000,
            "linger.ms": 5,
            "log_level": 0,
            "logger": _quiet,
        }
    )
    producer.init_transactions(30)
    consumer.subscribe([source])
    idle_since = time.monotonic()
    while True:
        msgs = [m for m in consumer.consume(BATCH, timeout=0.5) if m.error() is None]
        if not msgs:
            if (
                time.monotonic() - idle_since > 2
                and consumer.assignment()
                and _done(consumer, source)
            ):
                return 0
            continue
        idle_since = time.monotonic()
        try:
            producer.begin_transaction()
            for m in msgs:
                producer.produce(sink, key=m.key(), value=b"out-" + m.value())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()),
                consumer.consumer_group_metadata(),
                30,
            )
            _commit(producer)
        except KafkaException as exc:
            err = exc.args[0]
            if err.fatal():
                print(f"fatal: {err}", flush=True)
                return 3
            try:
                producer.abort_transaction(30)
            except KafkaException as again:
                if again.args[0].fatal():
                    print(f"fatal: {again.args[0]}", flush=True)
                    return 3
            _rewind(consumer)


def _commit(producer: Producer) -> None:
    """commit_transaction, retried while its error says so."""
    for _ in range(10):
        try:
            producer.commit_transaction(30)
            return
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise
            time.sleep(0.2)
    producer.commit_transaction(30)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
