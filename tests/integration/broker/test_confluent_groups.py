"""confluent-kafka consumer groups: rebalancing, commits, restarts."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_INVALID,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    Producer,
    TopicPartition,
)

from tests.integration.broker.conftest import (
    BROKER_ENV,
    admin,
    create_topic,
    quiet,
    unique,
    wait_all,
)
from tests.support.platform import TidelakeProcess


def _member(bootstrap: str, group: str, **conf: Any) -> Consumer:
    return Consumer(
        quiet(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 300,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **conf,
            }
        )
    )


def _produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    p = Producer(quiet({"bootstrap.servers": bootstrap}))
    for part in range(partitions):
        for i in range(per_partition):
            p.produce(topic, value=f"{part}:{i}".encode(), partition=part)
    assert p.flush(30) == 0


def _poll_until(members: list[Consumer], done: Any, timeout: float = 40) -> list[Any]:
    """Poll every member in turn until ``done(messages)``; returns the messages."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in members:
            m = c.poll(0.1)
            if m is not None and not m.error():
                got.append((c, m))
            elif m is not None and m.error().code() != KafkaError._PARTITION_EOF:
                raise AssertionError(m.error())
        if done(got):
            return got
    raise AssertionError(
        f"timed out; assignments {[sorted(tp.partition for tp in c.assignment()) for c in members]}"
    )


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_two_members_split_partitions_and_one_takes_all_when_the_other_leaves(
    tidelake: TidelakeProcess, strategy: str
) -> None:
    topic, group = unique("rebalance"), unique("group")
    create_topic(tidelake.bootstrap, topic, partitions=4)
    _produce(tidelake.bootstrap, topic, 4, 5)
    conf = {"partition.assignment.strategy": strategy}
    a = _member(tidelake.bootstrap, group, **conf)
    b = _member(tidelake.bootstrap, group, **conf)
    try:
        a.subscribe([topic])
        b.subscribe([topic])

        def split(_got: list[Any]) -> bool:
            pa = {tp.partition for tp in a.assignment()}
            pb = {tp.partition for tp in b.assignment()}
            return bool(pa) and bool(pb) and not pa & pb and pa | pb == {0, 1, 2, 3}

        _poll_until([a, b], split)
        assert len(a.assignment()) == 2 and len(b.assignment()) == 2
        b.close()
        _poll_until([a], lambda _g: len(a.assignment()) == 4)
        assert sorted(tp.partition for tp in a.assignment()) == [0, 1, 2, 3]
        a.unsubscribe()
    finally:
        a.close()


def test_unknown_group_offset_fetch_returns_minus_one(tidelake: TidelakeProcess) -> None:
    topic = unique("no-commits")
    create_topic(tidelake.bootstrap, topic, partitions=2)
    c = _member(tidelake.bootstrap, unique("never-committed"))
    try:
        res = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
        assert [(tp.offset, tp.error) for tp in res] == [(OFFSET_INVALID, None)] * 2
    finally:
        c.close()


@pytest.mark.parametrize("how", ["sigterm", "kill-9"])
def test_committed_offsets_survive_a_broker_restart(tmp_path: Path, how: str) -> None:
    data = tmp_path / "data"
    broker = TidelakeProcess(data, env=BROKER_ENV).start()
    topic, group = unique("durable-commits"), unique("group")
    try:
        create_topic(broker.bootstrap, topic, partitions=2)
        _produce(broker.bootstrap, topic, 2, 10)
        c = _member(broker.bootstrap, group)
        c.subscribe([topic])
        got = _poll_until([c], lambda g: len(g) >= 6)
        # Commit what was consumed, plus an explicit offset with metadata.
        c.commit(asynchronous=False)
        c.commit(offsets=[TopicPartition(topic, 1, 7, metadata="m-7")], asynchronous=False)
        before = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
        c.close()
        seen0 = [m.offset() for cc, m in got if m.partition() == 0]
        expected0 = max(seen0) + 1 if seen0 else OFFSET_INVALID
        assert [tp.offset for tp in before] == [expected0, 7]
    finally:
        if how == "kill-9":
            broker.kill()  # an acknowledged commit is durable
        else:
            assert broker.stop() == 0

    again = TidelakeProcess(data, env=BROKER_ENV, kafka_port=broker.kafka_port).start()
    try:
        c = _member(again.bootstrap, group)
        after = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
        assert [(tp.offset, tp.error) for tp in after] == [(expected0, None), (7, None)]
        assert after[1].metadata == "m-7"
        # A member of the group resumes from the committed offsets.
        c.subscribe([topic])
        rest = _poll_until([c], lambda g: len(g) >= (10 - max(expected0, 0)) + 3)
        starts: dict[int, int] = {}
        for _c, m in rest:
            starts.setdefault(m.partition(), m.offset())
        expected = {1: 7}
        if expected0 < 10:
            expected[0] = max(expected0, 0)
        assert starts == expected
        c.close()
    finally:
        again.stop()


def test_admin_lists_describes_alters_and_deletes_a_group(tidelake: TidelakeProcess) -> None:
    topic, group = unique("group-admin"), unique("group")
    create_topic(tidelake.bootstrap, topic, partitions=2)
    _produce(tidelake.bootstrap, topic, 2, 3)
    client = admin(tidelake.bootstrap)
    c = _member(tidelake.bootstrap, group)
    try:
        c.subscribe([topic])
        _poll_until([c], lambda _g: len(c.assignment()) == 2)
        c.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
        listed = client.list_consumer_groups().result(timeout=10).valid
        assert group in {g.group_id for g in listed}
        desc = client.describe_consumer_groups([group])[group].result(timeout=10)
        assert desc.group_id == group and len(desc.members) == 1
        assert sorted(tp.partition for tp in desc.members[0].assignment.topic_partitions) == [0, 1]
    finally:
        c.close()
    req = [ConsumerGroupTopicPartitions(group)]
    offsets = client.list_consumer_group_offsets(req)[group].result(timeout=10)
    assert [(tp.partition, tp.offset) for tp in offsets.topic_partitions] == [(0, 2)]
    # An empty group's offsets can be altered from outside it.
    alter = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 1, 3)])]
    client.alter_consumer_group_offsets(alter)[group].result(timeout=10)
    offsets = client.list_consumer_group_offsets(req)[group].result(timeout=10)
    assert sorted((tp.partition, tp.offset) for tp in offsets.topic_partitions) == [(0, 2), (1, 3)]
    assert wait_all(client.delete_consumer_groups([group])) == {group: None}
    listed = client.list_consumer_groups().result(timeout=10).valid
    assert group not in {g.group_id for g in listed}
    check = _member(tidelake.bootstrap, group)
    try:
        res = check.committed([TopicPartition(topic, 0)], timeout=10)
        assert res[0].offset == OFFSET_INVALID
    finally:
        check.close()


_MEMBER = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "log_level": 0,
              "session.timeout.ms": 2000, "heartbeat.interval.ms": 300})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.2)
    if c.assignment():
        print(len(c.assignment()), flush=True)
"""


def test_a_member_that_dies_without_leaving_is_evicted_after_its_session_timeout(
    tidelake: TidelakeProcess,
) -> None:
    topic, group = unique("evict"), unique("group")
    create_topic(tidelake.bootstrap, topic, partitions=4)
    child = subprocess.Popen(
        [sys.executable, "-c", _MEMBER, tidelake.bootstrap, group, topic],
        stdout=subprocess.PIPE,
    )
    a = _member(tidelake.bootstrap, group, **{"session.timeout.ms": 2000})
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"4"
        a.subscribe([topic])
        _poll_until([a], lambda _g: len(a.assignment()) == 2)
        child.kill()  # no LeaveGroup: the coordinator must notice the silence
        child.wait()
        started = time.monotonic()
        _poll_until([a], lambda _g: len(a.assignment()) == 4, timeout=20)
        assert time.monotonic() - started < 10
    finally:
        child.kill()
        child.wait()
        a.close()
