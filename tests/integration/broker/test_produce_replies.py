"""Produce responses the WAL's writer sends itself (``ingest.server.lent_reply``),
seen from real connections: each one answers its own request, in order, and
a client that holds one finds its records at once on another connection."""

from __future__ import annotations

import re
import urllib.request
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from ingest.protocol.records import build_batch
from tests.integration.broker.conftest import RECENT_TS, create_topic, quiet, unique
from tests.integration.broker.rawkafka import RawClient
from tests.support.platform import TidelakeProcess

_PRODUCE, _FETCH = 0, 1


def _produce(topic: str, value: bytes) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout": 10_000,
        "topic_data": [
            {
                "name": topic,
                "partition_data": [
                    {"index": 0, "records": build_batch([(None, value, [], RECENT_TS)])}
                ],
            }
        ],
    }


def _fetch(topic: str, offset: int) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def _replies_sent_whole(tidelake: TidelakeProcess) -> float:
    text = urllib.request.urlopen(f"{tidelake.http_url}/metrics", timeout=10).read().decode()
    m = re.search(r'^tidelake_storage_wal_writer_replies_total\{sent="whole"\} (\S+)$', text, re.M)
    assert m is not None, "the broker does not report its WAL writer's replies"
    return float(m.group(1))


def test_a_record_acknowledged_is_read_at_once_on_another_connection(
    tidelake: TidelakeProcess,
) -> None:
    topic = unique("replies-read")
    create_topic(tidelake.bootstrap, topic)
    before = _replies_sent_whole(tidelake)
    with RawClient(tidelake.bootstrap) as writer, RawClient(tidelake.bootstrap) as reader:
        for i in range(300):
            value = f"value-{i}".encode()
            resp = writer.request(_PRODUCE, 7, _produce(topic, value))
            [p] = resp.responses[0].partition_responses
            assert int(p.error_code) == 0 and int(p.base_offset) == i
            fetched = reader.request(_FETCH, 12, _fetch(topic, i))
            [part] = fetched.responses[0].partitions
            assert int(part.error_code) == 0
            assert int(part.high_watermark) == i + 1, f"record {i} acknowledged, not readable"
            assert value in bytes(part.records or b"")
    # the responses came from the WAL's writer (one request in flight, plain
    # TCP); not all of them on a loaded machine: the group commit starts
    # before the response is lent, and a loop thread descheduled for longer
    # than the fsync finds the records durable already and answers itself
    assert _replies_sent_whole(tidelake) - before >= 100


def test_pipelined_produce_requests_are_answered_in_order(tidelake: TidelakeProcess) -> None:
    topic = unique("replies-order")
    create_topic(tidelake.bootstrap, topic)
    with RawClient(tidelake.bootstrap) as c:
        for round_ in range(20):
            sent = []
            for _ in range(8):  # sent before any response is read
                c.send_frame(c.encode(_PRODUCE, 7, _produce(topic, b"v")))
                sent.append(c._corr)
            for k in range(8):
                cid, resp = c.read_response(_PRODUCE, 7)
                assert cid == sent[k]
                [p] = resp.responses[0].partition_responses
                assert int(p.error_code) == 0 and int(p.base_offset) == round_ * 8 + k


def test_a_producer_at_full_speed_loses_and_duplicates_nothing(tidelake: TidelakeProcess) -> None:
    topic = unique("replies-speed")
    create_topic(tidelake.bootstrap, topic, partitions=4)
    producer = Producer(
        quiet({"bootstrap.servers": tidelake.bootstrap, "acks": "all", "linger.ms": 1,
               "enable.idempotence": True, "compression.type": "lz4"})
    )  # fmt: skip
    failures: list[Any] = []
    n = 20_000
    for i in range(n):
        producer.produce(
            topic, str(i).encode(), partition=i % 4,
            on_delivery=lambda err, _m: err is not None and failures.append(err),
        )  # fmt: skip
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0 and not failures, failures
    consumer = Consumer(
        quiet({"bootstrap.servers": tidelake.bootstrap, "group.id": unique("g"),
               "auto.offset.reset": "earliest", "enable.auto.commit": False})
    )  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(4)])
        seen: list[int] = []
        for _ in range(600):
            for m in consumer.consume(1000, timeout=0.2):
                assert m.error() is None, m.error()
                seen.append(int(m.value()))
            if len(seen) >= n:
                break
        assert sorted(seen) == list(range(n))
    finally:
        consumer.close()
