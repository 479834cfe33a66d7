"""The consumer group protocol of KIP-848 (``group.protocol=consumer``) with
confluent-kafka: members join, partitions are reassigned by the broker when
members come and go (never consumed by two at once), offsets are committed
with member epochs and a later member resumes from them; the admin client
describes and lists the group."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, KafkaError, KafkaException, Producer

from tests.integration.broker.conftest import BROKER_ENV, admin, create_topic, quiet, unique
from tests.support.platform import TidelakeProcess

ENV = {
    **BROKER_ENV,
    "TIDELAKE_BROKER_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": "300",
    "TIDELAKE_BROKER_GROUP_CONSUMER_SESSION_TIMEOUT_MS": "4000",
}
PARTITIONS = 6


@pytest.fixture(scope="module")
def tidelake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidelakeProcess]:
    proc = TidelakeProcess(Path(tmp_path_factory.mktemp("kip848")) / "data", env=ENV)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def _consumer(bootstrap: str, group: str, name: str) -> Consumer:
    return Consumer(
        quiet(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "client.id": name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
    )


def _produce(bootstrap: str, topic: str, values: range) -> None:
    p = Producer(quiet({"bootstrap.servers": bootstrap, "linger.ms": 5}))
    for v in values:
        p.produce(topic, value=str(v).encode(), partition=v % PARTITIONS)
    assert p.flush(30) == 0


def _commit(c: Consumer) -> None:
    try:
        c.commit(asynchronous=False)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError._NO_OFFSET:  # nothing new to commit
            raise


def _owned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def test_members_share_partitions_and_resume_from_committed_offsets(
    tidelake: TidelakeProcess,
) -> None:
    bs = tidelake.bootstrap
    topic, group = unique("kip848"), unique("g848")
    create_topic(bs, topic, partitions=PARTITIONS)
    _produce(bs, topic, range(0, 600))
    consumers = {"a": _consumer(bs, group, "a")}
    consumers["a"].subscribe([topic])
    seen: Counter[int] = Counter()

    def pump(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for c in consumers.values():
                for m in c.consume(50, timeout=0.05):
                    if m.error() is None:
                        seen[int(m.value())] += 1
                if c.assignment():
                    _commit(c)

    def balanced(sizes: list[int]) -> bool:
        owned = [_owned(c) for c in consumers.values()]
        return sorted(len(o) for o in owned) == sizes and len(set().union(*owned)) == PARTITIONS

    pump(3)
    assert _owned(consumers["a"]) == set(range(PARTITIONS))
    for name in ("b", "c"):
        consumers[name] = _consumer(bs, group, name)
        consumers[name].subscribe([topic])
    deadline = time.monotonic() + 20
    while not balanced([2, 2, 2]):
        assert time.monotonic() < deadline, [sorted(_owned(c)) for c in consumers.values()]
        pump(0.3)
    _produce(bs, topic, range(600, 900))
    pump(3)
    consumers.pop("b").close()  # leaves the group: its partitions go to the others
    deadline = time.monotonic() + 20
    while not balanced([3, 3]):
        assert time.monotonic() < deadline, [sorted(_owned(c)) for c in consumers.values()]
        pump(0.3)
    _produce(bs, topic, range(900, 1200))
    pump(3)
    assert set(seen) == set(range(1200)), sorted(set(range(1200)) - set(seen))[:10]
    for c in consumers.values():
        c.close()
    # a later member of the group starts where the group's commits are
    _produce(bs, topic, range(1200, 1260))
    late = _consumer(bs, group, "late")
    late.subscribe([topic])
    fresh: list[int] = []
    deadline = time.monotonic() + 20
    while len(fresh) < 60 and time.monotonic() < deadline:
        fresh += [int(m.value()) for m in late.consume(100, timeout=0.3) if m.error() is None]
    late.close()
    assert sorted(fresh) == list(range(1200, 1260))
    # commits follow every batch, so a partition moving on never repeats a
    # record: nothing was consumed by two members
    assert max(seen.values()) == 1, [v for v, n in seen.items() if n > 1][:10]


def test_the_admin_client_describes_and_lists_consumer_groups(tidelake: TidelakeProcess) -> None:
    bs = tidelake.bootstrap
    topic, group = unique("kip848-admin"), unique("g848-admin")
    create_topic(bs, topic, partitions=2)
    c = _consumer(bs, group, "describe-me")
    c.subscribe([topic])
    deadline = time.monotonic() + 15
    while len(c.assignment()) < 2:
        assert time.monotonic() < deadline
        c.poll(0.2)
    try:
        client = admin(bs)
        desc = client.describe_consumer_groups([group])[group].result(10)
        assert desc.type == ConsumerGroupType.CONSUMER
        (member,) = desc.members
        assert member.client_id == "describe-me"
        assert {tp.partition for tp in member.assignment.topic_partitions} == {0, 1}
        listed = client.list_consumer_groups().result(10)
        mine = [g for g in listed.valid if g.group_id == group]
        assert mine and mine[0].type == ConsumerGroupType.CONSUMER
    finally:
        c.close()
