"""kafka-python: producer and consumer round trip, a consumer group that
commits, and KafkaAdminClient topic management."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewPartitions, NewTopic
from kafka.errors import InvalidTopicError, TopicAlreadyExistsError, UnknownTopicOrPartitionError

from tests.integration.broker.conftest import RECENT_TS, unique
from tests.support.platform import TidelakeProcess

# kafka-python 3.0 loads its schemas with deprecated importlib.resources calls.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _admin(tidelake: TidelakeProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=tidelake.bootstrap, request_timeout_ms=10_000)


def _producer(tidelake: TidelakeProcess, **kw: object) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=tidelake.bootstrap, acks="all", linger_ms=5, **kw)


# kafka-python needs python-snappy for snappy, which is not installed here.
@pytest.mark.parametrize("compression", [None, "gzip", "lz4", "zstd"])
def test_producer_and_consumer_round_trip(
    tidelake: TidelakeProcess, compression: str | None
) -> None:
    topic = unique(f"kp-{compression}")
    admin = _admin(tidelake)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    finally:
        admin.close()
    producer = _producer(tidelake, compression_type=compression)
    futures = []
    for i in range(100):
        futures.append(
            producer.send(
                topic,
                key=f"k{i}".encode(),
                value=f"v{i}".encode(),
                headers=[("n", str(i).encode())],
                partition=i % 2,
                timestamp_ms=RECENT_TS + i,
            )
        )
    producer.flush(30)
    metas = [f.get(timeout=30) for f in futures]
    producer.close()
    assert [m.offset for m in metas] == [i // 2 for i in range(100)]

    consumer = KafkaConsumer(
        bootstrap_servers=tidelake.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10_000,
    )
    consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    got = []
    for m in consumer:
        got.append(m)
        if len(got) == 100:
            break
    consumer.close()
    assert len(got) == 100
    for part in (0, 1):
        mine = [m for m in got if m.partition == part]
        assert [m.offset for m in mine] == list(range(50))
        assert [int(m.value[1:]) for m in mine] == list(range(part, 100, 2))
        for m in mine:
            i = int(m.value[1:])
            assert m.key == f"k{i}".encode()
            assert m.headers == [("n", str(i).encode())]
            assert m.timestamp == RECENT_TS + i


def test_consumer_group_commits_and_a_new_member_resumes_there(tidelake: TidelakeProcess) -> None:
    topic, group = unique("kp-group"), unique("kp-g")
    producer = _producer(tidelake)
    for i in range(20):
        producer.send(topic, value=str(i).encode())
    producer.flush(30)
    producer.close()

    def member() -> KafkaConsumer:
        return KafkaConsumer(
            topic,
            bootstrap_servers=tidelake.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )

    c = member()
    got: list[int] = []
    deadline = time.monotonic() + 30
    while len(got) < 12 and time.monotonic() < deadline:
        for msgs in c.poll(timeout_ms=500, max_records=12 - len(got)).values():
            got += [int(m.value) for m in msgs]
    assert got == list(range(12))
    c.commit()
    tp = TopicPartition(topic, 0)
    assert c.committed(tp) == 12
    c.close()

    c = member()
    rest: list[int] = []
    deadline = time.monotonic() + 30
    while len(rest) < 8 and time.monotonic() < deadline:
        for msgs in c.poll(timeout_ms=500).values():
            rest += [int(m.value) for m in msgs]
    c.close()
    assert rest == list(range(12, 20))


def test_admin_client_creates_and_deletes_topics(tidelake: TidelakeProcess) -> None:
    admin = _admin(tidelake)
    try:
        name = unique("kp-admin")
        admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1)])
        assert name in admin.list_topics()
        [desc] = admin.describe_topics([name])
        assert len(desc["partitions"]) == 3
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
        with pytest.raises(InvalidTopicError):
            admin.create_topics([NewTopic("no spaces", num_partitions=1, replication_factor=1)])
        admin.create_partitions({name: NewPartitions(total_count=5)})
        [desc] = admin.describe_topics([name])
        assert len(desc["partitions"]) == 5
        admin.delete_topics([name])
        assert name not in admin.list_topics()
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topics([name])
    finally:
        admin.close()
