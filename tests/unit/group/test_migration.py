"""Online migration between classic and consumer groups (KIP-848), over the
two coordinators wired as the broker wires them: a consumer-protocol member
joining a classic group converts it, the classic members stay and are driven
to the server-side assignment through JoinGroup/SyncGroup/Heartbeat, no
partition ever has two owners, the last consumer member leaving turns the
group classic again, offsets survive, and the policy decides."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from pydantic import ValidationError

from ingest.config import BrokerConfig
from ingest.group import GroupCoordinator
from ingest.group.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator, Heartbeat
from ingest.group.consumer.classic_codec import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from ingest.group.types import GroupState, MigrationPolicy
from ingest.metadata.memory import MemoryMetadataStore
from ingest.protocol.errors import ErrorCode
from tests.unit.group.conftest import FakeClock, make_config, settle

OK = int(ErrorCode.none)
TOPICS = {"t": 6}
Partition = tuple[str, int]


@dataclass
class Classic:
    """An eager classic client: lets everything go before it joins again."""

    member_id: str = ""
    generation: int = -1
    owned: set[Partition] = field(default_factory=set)


@dataclass
class Modern:
    member_id: str
    epoch: int = 0
    owned: set[Partition] = field(default_factory=set)


class Cluster:
    def __init__(self, policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL) -> None:
        self.clock = FakeClock()
        self.store = MemoryMetadataStore()
        self.classic = GroupCoordinator(
            self.store, make_config(group_initial_rebalance_delay_ms=100), self.clock
        )
        self.consumer = ConsumerGroupCoordinator(
            lambda: TOPICS,
            ConsumerGroupConfig(session_timeout_ms=10_000, migration_policy=policy),
            clock=self.clock,
        )
        self.classic.attach(self.consumer)
        self.classics: list[Classic] = []
        self.moderns: list[Modern] = []

    # --- classic clients -------------------------------------------------------------
    async def join_classic(self, c: Classic, protocol_type: str = "consumer") -> int:
        c.owned = set()  # eager: revoke everything first
        while True:
            res = await self.classic.join_group(
                group_id="g",
                member_id=c.member_id,
                group_instance_id=None,
                protocol_type=protocol_type,
                protocols=[("range", encode_subscription({"t"}, c.owned))],
                session_timeout_ms=5_000,
                rebalance_timeout_ms=5_000,
                client_id="classic",
                client_host="/127.0.0.1",
                require_known_member_id=True,
            )
            if res.error_code == ErrorCode.member_id_required:
                c.member_id = res.member_id
                continue
            if res.error_code != OK:
                return res.error_code
            c.member_id, c.generation = res.member_id, res.generation_id
            assignments: dict[str, bytes] = {}
            if res.leader == c.member_id:  # a classic group: this one assigns
                ids = [m.member_id for m in res.members]
                assignments = {
                    mid: encode_assignment({("t", p) for p in range(6) if ids[p % len(ids)] == mid})
                    for mid in ids
                }
            synced = await self.classic.sync_group(
                group_id="g",
                generation_id=c.generation,
                member_id=c.member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocol_name=res.protocol_name,
                assignments=assignments,
            )
            if synced.error_code == ErrorCode.rebalance_in_progress:
                continue
            if synced.error_code != OK:
                return synced.error_code
            got = decode_assignment(synced.assignment)
            assert got is not None
            c.owned = got
            self.check()
            return OK

    async def beat_classic(self, c: Classic) -> int:
        code = await self.classic.heartbeat(
            group_id="g", generation_id=c.generation, member_id=c.member_id, group_instance_id=None
        )
        if code in (ErrorCode.rebalance_in_progress, ErrorCode.illegal_generation):
            return await self.join_classic(c)
        return code

    async def commit_classic(self, c: Classic, offset: int) -> int:
        checked = self.consumer.validate_offsets("g", c.member_id, c.generation, api_version=8)
        if checked is None:  # a classic group
            res = await self.classic.commit_offsets(
                group_id="g",
                generation_id=c.generation,
                member_id=c.member_id,
                group_instance_id=None,
                offsets=[("t", p, offset, -1, None) for _, p in sorted(c.owned)],
            )
            return max(res.values(), default=OK)
        if checked != ErrorCode.none:
            return int(checked)
        res = await self.classic.store_offsets(
            "g", [("t", p, offset, -1, None) for _, p in sorted(c.owned)]
        )
        return max(res.values(), default=OK)

    # --- consumer-protocol clients ---------------------------------------------------
    def beat_modern(self, m: Modern, epoch: int | None = None) -> ErrorCode:
        res = self.consumer.heartbeat(
            "g",
            Heartbeat(
                m.member_id,
                m.epoch if epoch is None else epoch,
                subscribed={"t"} if m.epoch == 0 else None,
                owned=set(m.owned),
            ),
        )
        if res.error == ErrorCode.none and epoch is None:
            m.epoch = res.member_epoch
            if res.assignment is not None:
                m.owned = set(res.assignment)
        self.check()
        return res.error

    # --- the rule ---------------------------------------------------------------------
    def check(self) -> None:
        seen: dict[Partition, str] = {}
        for who in [*self.classics, *self.moderns]:
            for tp in who.owned:
                assert tp not in seen, f"{tp} owned by {seen[tp]} and {who.member_id}"
                seen[tp] = who.member_id

    def owned(self) -> set[Partition]:
        return {tp for who in [*self.classics, *self.moderns] for tp in who.owned}

    async def round(self, rng: random.Random | None = None) -> None:
        """Everyone heartbeats once: classic members at the same time (in a
        classic group their JoinGroup calls wait for each other)."""
        classics, moderns = list(self.classics), list(self.moderns)
        if rng is not None:
            rng.shuffle(classics)
            rng.shuffle(moderns)
        modern_first = rng is not None and rng.random() < 0.5
        if modern_first:
            for m in moderns:
                assert self.beat_modern(m) == ErrorCode.none
        codes = await asyncio.gather(*(self.beat_classic(c) for c in classics))
        assert all(code == OK for code in codes), codes
        if not modern_first:
            for m in moderns:
                assert self.beat_modern(m) == ErrorCode.none
        await settle()

    async def converge(self, rounds: int = 12, rng: random.Random | None = None) -> None:
        for _ in range(rounds):
            await self.round(rng)


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    c = Cluster()
    await c.classic.start()
    try:
        yield c
    finally:
        await c.classic.close()


async def form_classic_group(c: Cluster, n: int) -> None:
    members = [Classic() for _ in range(n)]
    c.classics.extend(members)
    joins = asyncio.gather(*(c.join_classic(m) for m in members))
    for _ in range(10):  # the initial rebalance delay (extended while members come)
        await settle()
        c.clock.now += 0.2
        c.classic.run_due_timers()
    codes = await joins
    assert all(code == OK for code in codes), codes
    await c.converge(3)
    assert c.owned() == {("t", p) for p in range(6)}


async def test_a_consumer_member_joining_a_classic_group_converts_it(cluster: Cluster) -> None:
    await form_classic_group(cluster, 3)
    assert cluster.classic.has_members("g")
    cluster.moderns.append(Modern("m1"))
    assert cluster.beat_modern(cluster.moderns[0]) == ErrorCode.none
    assert "g" in cluster.consumer.groups and not cluster.classic.has_members("g")
    group = cluster.consumer.groups["g"]
    assert group.classic_members() == 3 and len(group.members) == 4
    await cluster.converge()
    # every partition owned by exactly one of the four, shares 2/2/1/1
    assert cluster.owned() == {("t", p) for p in range(6)}
    sizes = sorted(len(w.owned) for w in [*cluster.classics, *cluster.moderns])
    assert sizes == [1, 1, 2, 2]
    assert group.state == "Stable"
    # ListGroups through the classic coordinator no longer names it classic
    described = await cluster.classic.describe_groups(["g"])
    assert described[0].state == "Dead" and described[0].members == []


async def test_classic_members_answer_with_their_generation(cluster: Cluster) -> None:
    await form_classic_group(cluster, 2)
    cluster.moderns.append(Modern("m1"))
    cluster.beat_modern(cluster.moderns[0])
    c = cluster.classics[0]
    wrong = await cluster.classic.heartbeat(
        group_id="g", generation_id=c.generation + 5, member_id=c.member_id, group_instance_id=None
    )
    assert wrong == ErrorCode.illegal_generation
    unknown = await cluster.classic.heartbeat(
        group_id="g", generation_id=c.generation, member_id="nobody", group_instance_id=None
    )
    assert unknown == ErrorCode.unknown_member_id
    # a consumer member may not use OffsetCommit < v9, a classic one must use its generation
    assert cluster.consumer.validate_offsets("g", "m1", 1, api_version=8) == (
        ErrorCode.unsupported_version
    )
    assert cluster.consumer.validate_offsets("g", c.member_id, c.generation + 1, api_version=8) == (
        ErrorCode.illegal_generation
    )
    assert cluster.consumer.validate_offsets("g", c.member_id, c.generation, api_version=8) == (
        ErrorCode.none
    )
    # nor may a consumer-protocol member take a classic member's id
    taken = cluster.consumer.heartbeat("g", Heartbeat(c.member_id, 0, subscribed={"t"}))
    assert taken.error == ErrorCode.unknown_member_id


async def test_a_rolling_upgrade_and_downgrade_never_gives_a_partition_two_owners(
    cluster: Cluster,
) -> None:
    rng = random.Random(848)
    await form_classic_group(cluster, 3)
    assert await cluster.commit_classic(cluster.classics[0], 10) == OK
    # upgrade: replace the classic members one by one
    for i in range(3):
        cluster.moderns.append(Modern(f"m{i}"))
        assert cluster.beat_modern(cluster.moderns[-1]) == ErrorCode.none
        await cluster.converge(rng=rng)
        old = cluster.classics.pop(0)
        left = await cluster.classic.leave_group(group_id="g", members=[(old.member_id, None)])
        assert left.members[0].error_code == OK
        await cluster.converge(rng=rng)
        assert cluster.owned() == {("t", p) for p in range(6)}
        if cluster.classics:
            assert await cluster.commit_classic(cluster.classics[0], 20 + i) == OK
    group = cluster.consumer.groups["g"]
    assert group.classic_members() == 0 and group.state == "Stable"
    # downgrade: replace the consumer members one by one
    for _ in range(3):
        cluster.classics.append(Classic())
        assert await cluster.join_classic(cluster.classics[-1]) == OK
        await cluster.converge(rng=rng)
        old_modern = cluster.moderns.pop(0)
        assert cluster.beat_modern(old_modern, epoch=-1) == ErrorCode.none
        old_modern.owned = set()
        await cluster.converge(rng=rng)
        assert cluster.owned() == {("t", p) for p in range(6)}
    # the last consumer member left: a classic group again, leader-assigned
    assert "g" not in cluster.consumer.groups
    assert cluster.classic.has_members("g")
    (described,) = await cluster.classic.describe_groups(["g"])
    assert described.state == str(GroupState.STABLE) and len(described.members) == 3
    assert described.protocol_type == "consumer"
    # offsets committed before, during and after the conversions are all there
    fetched = await cluster.classic.fetch_offsets(group_id="g", partitions=None)
    assert {o.offset for o in fetched.partitions} == {10, 20, 21}
    assert await cluster.commit_classic(cluster.classics[0], 30) == OK
    fetched = await cluster.classic.fetch_offsets(group_id="g", partitions=None)
    assert 30 in {o.offset for o in fetched.partitions}


async def test_downgrade_keeps_commits_of_the_consumer_group_epoch(cluster: Cluster) -> None:
    await form_classic_group(cluster, 2)
    cluster.moderns.append(Modern("m1"))
    cluster.beat_modern(cluster.moderns[0])
    await cluster.converge()
    cluster.beat_modern(cluster.moderns.pop(), epoch=-1)
    assert cluster.classic.has_members("g")
    # before they rejoin, the classic members commit with their old epochs
    for c in cluster.classics:
        assert await cluster.commit_classic(c, 7) == OK
        beat = await cluster.classic.heartbeat(
            group_id="g", generation_id=c.generation, member_id=c.member_id, group_instance_id=None
        )
        assert beat == ErrorCode.rebalance_in_progress
    await cluster.converge()
    assert cluster.owned() == {("t", p) for p in range(6)}


@pytest.mark.parametrize(
    ("policy", "upgrades", "downgrades"),
    [
        (MigrationPolicy.BIDIRECTIONAL, True, True),
        (MigrationPolicy.UPGRADE, True, False),
        (MigrationPolicy.DOWNGRADE, False, True),
        (MigrationPolicy.DISABLED, False, False),
    ],
)
async def test_the_migration_policy_decides_both_ways(
    policy: MigrationPolicy, upgrades: bool, downgrades: bool
) -> None:
    cluster = Cluster(policy)
    await cluster.classic.start()
    try:
        await form_classic_group(cluster, 2)
        cluster.moderns.append(Modern("m1"))
        error = cluster.beat_modern(cluster.moderns[0])
        if not upgrades:
            assert error == ErrorCode.group_id_not_found
            assert cluster.classic.has_members("g")
            return
        assert error == ErrorCode.none
        await cluster.converge()
        cluster.beat_modern(cluster.moderns.pop(), epoch=-1)
        assert ("g" in cluster.consumer.groups) is not downgrades
        assert cluster.classic.has_members("g") is downgrades
        await cluster.converge()
        assert cluster.owned() == {("t", p) for p in range(6)}
    finally:
        await cluster.classic.close()


async def test_a_classic_group_of_another_protocol_type_is_not_converted(
    cluster: Cluster,
) -> None:
    joining = asyncio.ensure_future(
        cluster.classic.join_group(
            group_id="g",
            member_id="",
            group_instance_id=None,
            protocol_type="connect",
            protocols=[("default", b"x")],
            session_timeout_ms=5_000,
            rebalance_timeout_ms=5_000,
            client_id="connect",
            client_host="/127.0.0.1",
            require_known_member_id=False,
        )
    )
    for _ in range(3):  # the initial rebalance delay
        await settle()
        cluster.clock.now += 0.2
        cluster.classic.run_due_timers()
    assert (await joining).error_code == OK
    res = cluster.consumer.heartbeat("g", Heartbeat("m", 0, subscribed={"t"}))
    assert res.error == ErrorCode.group_id_not_found


async def test_a_classic_member_of_another_protocol_type_cannot_join_a_consumer_group(
    cluster: Cluster,
) -> None:
    cluster.moderns.append(Modern("m1"))
    cluster.beat_modern(cluster.moderns[0])
    assert await cluster.join_classic(Classic(), protocol_type="connect") == (
        ErrorCode.inconsistent_group_protocol
    )


async def test_a_member_that_never_rejoins_is_removed_and_its_partitions_freed(
    cluster: Cluster,
) -> None:
    await form_classic_group(cluster, 2)
    cluster.moderns.append(Modern("m1"))
    cluster.beat_modern(cluster.moderns[0])
    silent = cluster.classics.pop()
    for _ in range(6):  # past its 5 s session; the others keep beating
        cluster.clock.now += 1
        await cluster.round()
        cluster.consumer.tick()
    silent.owned = set()
    await cluster.converge()
    assert cluster.owned() == {("t", p) for p in range(6)}
    assert len(cluster.consumer.groups["g"].members) == 2


def test_consumer_protocol_metadata_round_trips_and_garbage_is_refused() -> None:
    meta = encode_subscription({"a", "b"}, {("a", 1), ("b", 0)})
    sub = decode_subscription(meta)
    assert sub is not None and sub.topics == ("a", "b") and sub.owned == {("a", 1), ("b", 0)}
    assert decode_subscription(encode_subscription({"a"}, version=0)) is not None
    assert decode_assignment(encode_assignment({("a", 3), ("b", 2)})) == {("a", 3), ("b", 2)}
    for junk in (b"\x00", b"\x00\x00\x7f\xff\xff\xff", b"\x00\x01\x00\x00\x00\x01\x00\x09ab"):
        assert decode_subscription(junk) is None
    assert decode_assignment(b"\x00\x00\x00\x00\x00\x05") is None


def test_the_policy_setting_keeps_kafkas_values_case_insensitively() -> None:
    assert BrokerConfig.model_validate({}).group_consumer_migration_policy == "bidirectional"
    cfg = BrokerConfig.model_validate({"group_consumer_migration_policy": "UPGRADE"})
    assert MigrationPolicy(cfg.group_consumer_migration_policy) is MigrationPolicy.UPGRADE
    with pytest.raises(ValidationError, match="group_consumer_migration_policy"):
        BrokerConfig.model_validate({"group_consumer_migration_policy": "sideways"})


async def test_a_static_classic_member_comes_back_to_its_place(cluster: Cluster) -> None:
    cluster.moderns.append(Modern("m1"))
    cluster.beat_modern(cluster.moderns[0])

    async def join(member_id: str) -> tuple[str, int]:
        res = await cluster.classic.join_group(
            group_id="g",
            member_id=member_id,
            group_instance_id="instance-1",
            protocol_type="consumer",
            protocols=[("range", encode_subscription({"t"}))],
            session_timeout_ms=5_000,
            rebalance_timeout_ms=5_000,
            client_id="static",
            client_host="/127.0.0.1",
            require_known_member_id=True,
        )
        assert res.error_code == OK, res
        return res.member_id, res.generation_id

    first, generation = await join("")
    group = cluster.consumer.groups["g"]
    assert group.members[first].instance_id == "instance-1"
    again, _ = await join("")  # restarted: a new member id, the same place
    assert again != first and first not in group.members and again in group.members
    fenced = await cluster.classic.heartbeat(
        group_id="g", generation_id=generation, member_id=first, group_instance_id="instance-1"
    )
    assert fenced == ErrorCode.fenced_instance_id
    left = await cluster.classic.leave_group(group_id="g", members=[("", "instance-1")])
    assert left.members[0].error_code == OK and again not in group.members


async def test_a_classic_member_joining_an_empty_consumer_group_makes_it_classic(
    cluster: Cluster,
) -> None:
    cluster.moderns.append(Modern("m1"))
    cluster.beat_modern(cluster.moderns[0])
    cluster.beat_modern(cluster.moderns.pop(), epoch=-1)
    assert "g" in cluster.consumer.groups and not cluster.consumer.active("g")
    await form_classic_group(cluster, 1)
    assert "g" not in cluster.consumer.groups and cluster.classic.has_members("g")
