"""Cluster-wide reads for the console and the lag gauges, over fake brokers
(no network): each group as its coordinator lists it, ends from each
partition's leader, and a broker that does not answer is named, not raised."""

from __future__ import annotations

import asyncio
import struct
import time
import zlib
from collections.abc import AsyncIterator, Sequence

import pytest

from api.cluster_reads import (
    ClusterReads,
    GroupInfo,
    ListedGroup,
    LocalReads,
    PartitionEnds,
    cluster_reads,
    decode_assignment,
)
from api.cluster_reads.model import BrokerReads, TopicPartition
from api.metrics.lag import coordinated_groups, group_lags
from ingest.broker import Broker
from ingest.cluster.view import BrokerEndpoint, hashed_coordinator
from ingest.config import BrokerConfig
from ingest.metadata import MemoryMetadataStore
from ingest.metadata.api import CommittedOffset
from ingest.s3stream import MemoryStreamEngine

NODES = (1, 2, 3)


def _group_on(node: int, prefix: str) -> str:
    """A group id that the hash puts on ``node`` (of brokers 1, 2, 3)."""
    return next(
        g for i in range(1000) if zlib.crc32((g := f"{prefix}-{i}").encode()) % 3 == node - 1
    )


class FakeView:
    def __init__(self, node_id: int, leaders: dict[TopicPartition, int] | None = None) -> None:
        self._node_id = node_id
        self._brokers = [BrokerEndpoint(n, "127.0.0.1", 9000 + n) for n in NODES]
        self.leaders = leaders or {}

    @property
    def node_id(self) -> int:
        return self._node_id

    @property
    def clustered(self) -> bool:
        return True

    def brokers(self) -> Sequence[BrokerEndpoint]:
        return self._brokers

    def controller_id(self) -> int:
        return 1

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        return self.leaders.get((topic, partition), -1), 0

    def coordinator_for(self, group: str) -> BrokerEndpoint:
        return hashed_coordinator(group, self._brokers)


class FakeReads:
    def __init__(
        self,
        listed: Sequence[ListedGroup] = (),
        described: dict[str, GroupInfo] | None = None,
        hws: dict[TopicPartition, int] | None = None,
    ) -> None:
        self.listed = list(listed)
        self.described = described or {}
        self.hws = hws or {}
        self.asked: list[TopicPartition] = []

    async def list_groups(self) -> list[ListedGroup]:
        return self.listed

    async def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupInfo]:
        return {g: self.described.get(g, GroupInfo(g, "Dead", "", "")) for g in group_ids}

    async def end_offsets(
        self, partitions: Sequence[TopicPartition], earliest: bool
    ) -> dict[TopicPartition, PartitionEnds]:
        self.asked += partitions
        return {tp: PartitionEnds(0 if earliest else None, self.hws.get(tp)) for tp in partitions}


class DeadReads:
    """A broker whose listener refuses connections."""

    async def list_groups(self) -> list[ListedGroup]:
        raise ConnectionRefusedError("refused")

    async def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupInfo]:
        raise ConnectionRefusedError("refused")

    async def end_offsets(
        self, partitions: Sequence[TopicPartition], earliest: bool
    ) -> dict[TopicPartition, PartitionEnds]:
        raise ConnectionRefusedError("refused")


class HungReads(DeadReads):
    """A broker that accepts and never answers."""

    async def list_groups(self) -> list[ListedGroup]:
        await asyncio.sleep(3600)
        return []


def _cluster(view: FakeView, reads: dict[int, BrokerReads], timeout_s: float = 1.0) -> ClusterReads:
    return ClusterReads(
        lambda: view, reads[view.node_id], lambda e: reads[e.node_id], timeout_s=timeout_s
    )


async def test_every_group_is_listed_as_its_coordinator_lists_it_with_its_coordinator() -> None:
    on2, on3 = _group_on(2, "billing"), _group_on(3, "shipping")
    # every broker lists offset-only groups as Empty; only the coordinator knows the members
    reads: dict[int, BrokerReads] = {
        1: FakeReads([ListedGroup(on2, "", "Empty", "classic")]),
        2: FakeReads([ListedGroup(on2, "consumer", "Stable", "classic")]),
        3: FakeReads([ListedGroup(on3, "consumer", "Stable", "consumer")]),
    }
    listing = await _cluster(FakeView(1), reads).list_groups()
    assert listing.unreachable == []
    by_id = {g.group_id: g for g in listing.groups}
    assert set(by_id) == {on2, on3}
    assert (by_id[on2].state, by_id[on2].coordinator, by_id[on2].coordinator_answered) == (
        "Stable",
        2,
        True,
    )
    assert (by_id[on3].coordinator, by_id[on3].group_type) == (3, "consumer")


async def test_a_broker_that_does_not_answer_is_named_and_its_groups_are_unknown() -> None:
    on2 = _group_on(2, "a")
    reads: dict[int, BrokerReads] = {
        1: FakeReads([ListedGroup(on2, "", "Empty", "classic")]),
        2: DeadReads(),
        3: HungReads(),
    }
    started = time.monotonic()
    listing = await _cluster(FakeView(1), reads, timeout_s=0.3).list_groups()
    assert time.monotonic() - started < 2  # the hung broker costs one timeout, in parallel
    assert listing.unreachable == [2, 3]
    [g] = listing.groups
    assert (g.group_id, g.state, g.coordinator, g.coordinator_answered) == (
        on2,
        "Unknown",
        2,
        False,
    )
    described, unreachable = await _cluster(FakeView(1), reads).describe_groups([on2])
    assert described == {} and unreachable == [2]


async def test_groups_are_described_by_their_coordinators() -> None:
    on1, on3 = _group_on(1, "x"), _group_on(3, "y")
    info3 = GroupInfo(on3, "Stable", "consumer", "range")
    reads: dict[int, BrokerReads] = {
        1: FakeReads(described={on1: GroupInfo(on1, "Empty", "", "")}),
        2: DeadReads(),  # coordinates neither: not asked
        3: FakeReads(described={on3: info3}),
    }
    described, unreachable = await _cluster(FakeView(1), reads).describe_groups([on1, on3])
    assert unreachable == []
    assert described[on3] == info3 and described[on1].state == "Empty"


async def test_partition_ends_come_from_each_partitions_leader() -> None:
    view = FakeView(1, {("t", 0): 1, ("t", 1): 2, ("t", 2): 3, ("t", 3): -1})
    r1, r2 = FakeReads(hws={("t", 0): 10}), FakeReads(hws={("t", 1): 20})
    reads: dict[int, BrokerReads] = {1: r1, 2: r2, 3: DeadReads()}
    states, unreachable = await _cluster(view, reads).partitions(
        [("t", p) for p in range(4)], earliest=True
    )
    assert r1.asked == [("t", 0)] and r2.asked == [("t", 1)]
    assert [states[("t", p)].ends.high_watermark for p in range(4)] == [10, 20, None, None]
    assert [states[("t", p)].leader for p in range(4)] == [1, 2, 3, -1]
    assert states[("t", 1)].ends.log_start_offset == 0
    assert unreachable == [3]


def test_consumer_protocol_assignment_is_decoded_by_topic() -> None:
    topic = b"orders"
    data = struct.pack(">hih", 0, 1, len(topic)) + topic + struct.pack(">iii", 2, 3, 1)
    data += struct.pack(">i", -1)  # no user data
    assert decode_assignment(data) == (("orders", (1, 3)),)
    assert decode_assignment(b"") == ()
    assert decode_assignment(data[:12]) == ()  # truncated: what parsed (nothing whole)


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    b = Broker(BrokerConfig(port=0, node_id=1), MemoryMetadataStore(), MemoryStreamEngine())
    await b.engine.start()
    await b.logs.load()
    await b.logs.create_topic("orders", 2, 1, {})
    try:
        yield b
    finally:
        await b.groups.close()
        await b.engine.close()


def _commit(broker: Broker, group: str, partition: int, offset: int) -> None:
    broker.store.commit_offsets(group, [CommittedOffset("orders", partition, offset, -1, "", 0)])


async def test_lag_gauges_export_only_the_groups_this_broker_coordinates(broker: Broker) -> None:
    mine, theirs = _group_on(1, "mine"), _group_on(2, "theirs")
    for g in (mine, theirs):
        _commit(broker, g, 0, 1)
    view = FakeView(1)
    broker.cluster = view
    assert await coordinated_groups(broker) == [mine]


async def test_lag_uses_the_high_watermark_of_partitions_led_by_other_brokers(
    broker: Broker,
) -> None:
    plog = broker.logs.partition("orders", 0)
    assert plog is not None
    group = _group_on(1, "lagging")
    _commit(broker, group, 0, 0)
    _commit(broker, group, 1, 5)
    # partition 1 is led by broker 2: here the local log is not the truth
    view = FakeView(1, {("orders", 0): 1, ("orders", 1): 2})
    broker.cluster = view
    reads = ClusterReads(
        lambda: view,
        LocalReads(broker),
        lambda e: {2: FakeReads(hws={("orders", 1): 12}), 3: DeadReads()}[e.node_id],
        timeout_s=1.0,
    )
    lags = await group_lags(broker, reads)
    assert [(p.partition, p.committed, p.high_watermark, p.lag) for p in lags] == [
        (0, 0, plog.high_watermark, plog.high_watermark),
        (1, 5, 12, 7),
    ]


async def test_other_brokers_are_asked_on_the_inter_broker_listener_or_named(
    broker: Broker,
) -> None:
    from api.cluster_reads import peer_endpoint
    from ingest.cluster.api import ListenerEndpoint

    internal = broker.inter_broker_listener
    inside = ListenerEndpoint(internal, "10.0.0.2", 19092, "PLAINTEXT")
    secure = ListenerEndpoint("SECURE", "public.example", 9093, "SASL_SSL")
    both = BrokerEndpoint(2, "public.example", 9093, listeners=(secure, inside))
    only_secure = BrokerEndpoint(3, "public.example", 9093, listeners=(secure,))
    reached = peer_endpoint(broker, both)
    assert reached is not None and (reached.host, reached.port) == ("10.0.0.2", 19092)
    assert peer_endpoint(broker, only_secure) is None
    view = FakeView(1)
    view._brokers = [view._brokers[0], only_secure]
    broker.cluster = view
    listing = await cluster_reads(broker, timeout_s=1.0).list_groups()
    assert listing.unreachable == [3]
