"""Online migration between the classic and the consumer group protocol
(KIP-848) with confluent-kafka (kafka-python among the classic members of
the eager run, and an aiokafka member through both conversions): three ``group.protocol=classic`` consumers read a
six-partition topic while a producer writes to it; they are replaced
one by one by ``group.protocol=consumer`` members (a rolling upgrade), then
back (a rolling downgrade). Every record is consumed, no partition is ever
owned by two members at once (checked on every assign and revoke callback),
a member that takes over starts at the group's committed offsets, and the
admin client sees the group's type change."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.abc import ConsumerRebalanceListener as AioListener
from confluent_kafka import (
    Consumer,
    ConsumerGroupType,
    KafkaException,
    Producer,
    TopicPartition,
)
from kafka import ConsumerRebalanceListener, KafkaConsumer
from kafka import TopicPartition as KafkaPartition
from kafka.errors import KafkaError as KafkaPythonError

from tests.integration.broker.conftest import BROKER_ENV, admin, create_topic, quiet, unique
from tests.integration.broker.rawkafka import RawClient
from tests.support.platform import TidelakeProcess

ENV = {
    **BROKER_ENV,
    "TIDELAKE_BROKER_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": "300",
    "TIDELAKE_BROKER_GROUP_CONSUMER_SESSION_TIMEOUT_MS": "6000",
}
PARTITIONS = 6
PHASE_S = 40  # the longest any step may take
PER_PUMP = 20  # records produced per pump round (bounded load)


@pytest.fixture(scope="module")
def tidelake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidelakeProcess]:
    proc = TidelakeProcess(Path(tmp_path_factory.mktemp("migration")) / "data", env=ENV)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


class Fleet:
    """The group's members, what each owns, and what they consumed."""

    def __init__(self, bootstrap: str, topic: str, group: str, strategy: str) -> None:
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.strategy = strategy  # of the classic members
        self.members: dict[str, Consumer | KafkaConsumer] = {}
        self.owner: dict[int, str] = {}
        self.violations: list[str] = []
        self.seen: Counter[int] = Counter()
        self.first: dict[tuple[str, int], int] = {}  # (member, partition) -> first offset read
        self.floor: dict[str, dict[int, int]] = {}  # member -> committed offsets when it came
        self.producer = Producer(quiet({"bootstrap.servers": bootstrap, "linger.ms": 5}))
        self.produced = 0

    def _on_assign(self, name: str) -> Callable[[Consumer, list[TopicPartition]], None]:
        def cb(_c: Consumer, partitions: list[TopicPartition]) -> None:
            for tp in partitions:
                holder = self.owner.get(tp.partition)
                if holder is not None and holder != name:
                    self.violations.append(f"p{tp.partition}: {name} while {holder} owns it")
                self.owner[tp.partition] = name

        return cb

    def _on_revoke(
        self, name: str, commit: bool
    ) -> Callable[[Consumer, list[TopicPartition]], None]:
        def cb(c: Consumer, partitions: list[TopicPartition]) -> None:
            if commit:
                _commit(c)
            for tp in partitions:
                if self.owner.get(tp.partition) == name:
                    del self.owner[tp.partition]

        return cb

    def _listener(self, name: str) -> ConsumerRebalanceListener:
        assign, fleet = self._on_assign(name), self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: set[KafkaPartition]) -> None:
                # (kafka-python may not commit from here: it commits after each poll)
                for tp in revoked:
                    if fleet.owner.get(tp.partition) == name:
                        del fleet.owner[tp.partition]

            def on_partitions_assigned(self, assigned: set[KafkaPartition]) -> None:
                assign(None, [TopicPartition(tp.topic, tp.partition) for tp in assigned])  # type: ignore[arg-type]

        return Listener()

    def add_kafka_python(self, name: str) -> None:
        """A classic member with kafka-python (eager: range, roundrobin)."""
        self.floor[name] = self.committed()
        c = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        c.subscribe([self.topic], listener=self._listener(name))
        self.members[name] = c

    def committed(self) -> dict[int, int]:
        probe = Consumer(quiet({"bootstrap.servers": self.bootstrap, "group.id": self.group}))
        try:
            tps = probe.committed(
                [TopicPartition(self.topic, p) for p in range(PARTITIONS)], timeout=10
            )
        finally:
            probe.close()
        return {tp.partition: tp.offset for tp in tps}

    def add(self, name: str, protocol: str) -> None:
        conf = {
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "group.protocol": protocol,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        if protocol == "classic":
            conf |= {
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
                "partition.assignment.strategy": self.strategy,
            }
        self.floor[name] = self.committed()
        c = Consumer(quiet(conf))
        c.subscribe(
            [self.topic],
            on_assign=self._on_assign(name),
            on_revoke=self._on_revoke(name, commit=True),
            on_lost=self._on_revoke(name, commit=False),
        )
        self.members[name] = c

    def remove(self, name: str) -> None:
        c = self.members.pop(name)
        if isinstance(c, KafkaConsumer):
            _commit_kafka_python(c)
        else:
            _commit(c)
        c.close()  # leaves the group
        for p, holder in list(self.owner.items()):
            if holder == name:
                del self.owner[p]

    def produce(self, n: int) -> None:
        for _ in range(n):
            v = self.produced
            self.producer.produce(self.topic, value=str(v).encode(), partition=v % PARTITIONS)
            self.produced += 1
        self.producer.poll(0)

    def pump(self, produce: bool = True) -> None:
        if produce:
            self.produce(PER_PUMP)
        for name, c in list(self.members.items()):
            if isinstance(c, KafkaConsumer):
                self._pump_kafka_python(name, c)
                continue
            got = False
            for m in c.consume(100, timeout=0.05):
                if m.error() is not None:
                    continue
                got = True
                self.seen[int(m.value())] += 1
                self.first.setdefault((name, m.partition()), m.offset())
            if got:
                _commit(c)

    def _pump_kafka_python(self, name: str, c: KafkaConsumer) -> None:
        batches = c.poll(timeout_ms=50, max_records=100)
        for tp, records in batches.items():
            for r in records:
                self.seen[int(r.value)] += 1
                self.first.setdefault((name, tp.partition), r.offset)
        if batches:
            _commit_kafka_python(c)

    def until(self, what: str, done: Callable[[], bool], produce: bool = True) -> None:
        deadline = time.monotonic() + PHASE_S
        while not done():
            assert time.monotonic() < deadline, f"{what}: owners {self.owner}"
            self.pump(produce)

    def owns(self, name: str) -> set[int]:
        return {p for p, holder in self.owner.items() if holder == name}

    def all_owned(self) -> bool:
        return len(self.owner) == PARTITIONS and set(self.owner.values()) == set(self.members)

    def group_type(self) -> ConsumerGroupType:
        client = admin(self.bootstrap)  # kept alive until its answer is in
        listed = client.list_consumer_groups().result(10)
        mine = [g for g in listed.valid if g.group_id == self.group]
        assert len(mine) == 1, (self.group, listed.valid, listed.errors)
        return mine[0].type


def _commit(c: Consumer) -> None:
    try:
        c.commit(asynchronous=False)
    except KafkaException:
        pass  # nothing to commit, or the member is between generations: at least once


def _commit_kafka_python(c: KafkaConsumer | Consumer | None) -> None:
    if isinstance(c, KafkaConsumer):
        try:
            c.commit()
        except KafkaPythonError:
            pass  # between generations: at least once


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_rolling_upgrade_and_downgrade_while_producing(
    tidelake: TidelakeProcess, strategy: str
) -> None:
    """Classic members that revoke everything before they rejoin (eager
    ``range``) and ones that keep what they may (``cooperative-sticky``)."""
    bs = tidelake.bootstrap
    topic, group = unique("migrate"), unique("g-migrate")
    create_topic(bs, topic, partitions=PARTITIONS)
    fleet = Fleet(bs, topic, group, strategy)
    started = time.monotonic()
    try:
        # with range, kafka-python members are among the classic ones
        python_members = {"classic2", "old1"} if strategy == "range" else set()
        for i in range(3):
            if f"classic{i}" in python_members:
                fleet.add_kafka_python(f"classic{i}")
            else:
                fleet.add(f"classic{i}", "classic")
        fleet.until("classic group formed", fleet.all_owned)
        assert fleet.group_type() == ConsumerGroupType.CLASSIC
        fleet.until("classic members read", lambda: len(fleet.seen) >= 60)

        # rolling upgrade: a consumer-protocol member in, a classic one out
        for i in range(3):
            fleet.add(f"new{i}", "consumer")
            fleet.until(f"new{i} owns a partition", lambda n=f"new{i}": bool(fleet.owns(n)))
            if i == 0:
                assert fleet.group_type() == ConsumerGroupType.CONSUMER
                client = admin(bs)
                desc = client.describe_consumer_groups([group])[group].result(10)
                assert desc.type == ConsumerGroupType.CONSUMER
                assert {m.client_id for m in desc.members} == {
                    "classic0",
                    "classic1",
                    "classic2",
                    "new0",
                }
                # ConsumerGroupDescribe v1 tells the kinds apart: 0 classic, 1 consumer
                with RawClient(bs) as raw:
                    resp = raw.request(
                        69, 1, {"group_ids": (group,), "include_authorized_operations": False}
                    )
                (described,) = resp.groups
                kinds = {m.client_id: int(m.member_type) for m in described.members}
                assert kinds == {"classic0": 0, "classic1": 0, "classic2": 0, "new0": 1}
            fleet.remove(f"classic{i}")
            fleet.until(f"classic{i} replaced", fleet.all_owned)
        assert fleet.group_type() == ConsumerGroupType.CONSUMER

        # rolling downgrade: a classic member in, a consumer-protocol one out
        for i in range(3):
            if f"old{i}" in python_members:
                fleet.add_kafka_python(f"old{i}")
            else:
                fleet.add(f"old{i}", "classic")
            fleet.until(f"old{i} owns a partition", lambda n=f"old{i}": bool(fleet.owns(n)))
            fleet.remove(f"new{i}")
            fleet.until(f"new{i} replaced", fleet.all_owned)
        assert fleet.group_type() == ConsumerGroupType.CLASSIC

        # the producer stops; the group reads everything
        assert fleet.producer.flush(30) == 0
        fleet.until("every record read", lambda: len(fleet.seen) == fleet.produced, produce=False)
    finally:
        for c in fleet.members.values():
            c.close()
    elapsed = time.monotonic() - started
    assert not fleet.violations, fleet.violations
    assert set(fleet.seen) == set(range(fleet.produced))
    # a member that took a partition over started at the group's commits as
    # they were when it came (the commits survived both conversions)
    behind = [
        (name, p, offset, fleet.floor[name][p])
        for (name, p), offset in fleet.first.items()
        if offset < fleet.floor[name][p]
    ]
    assert not behind, behind
    repeated = sum(n - 1 for n in fleet.seen.values())
    print(
        f"migration ({strategy}): {fleet.produced} records, {repeated} read twice, "
        f"{elapsed:.1f} s for 6 member changes"
    )
    assert repeated < fleet.produced // 4


async def test_an_aiokafka_classic_member_goes_through_both_conversions(
    tidelake: TidelakeProcess,
) -> None:
    """An aiokafka member (classic) alone in its group; a consumer-protocol
    member joins (the group converts, aiokafka gives up its share), then
    leaves (the group turns classic, aiokafka takes everything back)."""
    bs = tidelake.bootstrap
    topic, group = unique("migrate-aio"), unique("g-migrate-aio")
    create_topic(bs, topic, partitions=PARTITIONS)
    fleet = Fleet(bs, topic, group, "range")
    assign = fleet._on_assign("aio")

    class Listener(AioListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: set[KafkaPartition]) -> None:
            for tp in revoked:
                if fleet.owner.get(tp.partition) == "aio":
                    del fleet.owner[tp.partition]

        async def on_partitions_assigned(self, assigned: set[KafkaPartition]) -> None:
            assign(None, [TopicPartition(tp.topic, tp.partition) for tp in assigned])  # type: ignore[arg-type]

    aio = AIOKafkaConsumer(
        bootstrap_servers=bs,
        group_id=group,
        client_id="aio",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    await aio.start()
    aio.subscribe([topic], listener=Listener())

    async def pump() -> None:
        fleet.produce(PER_PUMP)
        batches = await aio.getmany(timeout_ms=50, max_records=100)
        for records in batches.values():
            for r in records:
                fleet.seen[int(r.value)] += 1
        if batches:
            try:
                await aio.commit()
            except Exception:  # noqa: BLE001 - between generations: at least once
                pass
        fleet.pump(produce=False)

    async def until(what: str, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + PHASE_S
        while not done():
            assert time.monotonic() < deadline, f"{what}: owners {fleet.owner}"
            await pump()

    try:
        await until("aio owns everything", lambda: len(fleet.owns("aio")) == PARTITIONS)
        assert fleet.group_type() == ConsumerGroupType.CLASSIC
        fleet.add("new", "consumer")
        await until("new owns a partition", lambda: bool(fleet.owns("new")))
        await until("shared", lambda: len(fleet.owner) == PARTITIONS and bool(fleet.owns("aio")))
        assert fleet.group_type() == ConsumerGroupType.CONSUMER
        fleet.remove("new")
        await until("aio owns everything again", lambda: len(fleet.owns("aio")) == PARTITIONS)
        assert fleet.group_type() == ConsumerGroupType.CLASSIC
        assert fleet.producer.flush(30) == 0
        deadline = time.monotonic() + PHASE_S
        while len(fleet.seen) < fleet.produced:
            assert time.monotonic() < deadline, fleet.produced - len(fleet.seen)
            batches = await aio.getmany(timeout_ms=100, max_records=500)
            for records in batches.values():
                for r in records:
                    fleet.seen[int(r.value)] += 1
    finally:
        await aio.stop()
        for c in fleet.members.values():
            c.close()
        await asyncio.sleep(0)
    assert not fleet.violations, fleet.violations
    assert set(fleet.seen) == set(range(fleet.produced))
