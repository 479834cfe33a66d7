"""Session expiry and the timer task."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from ingest.group import GroupConfig, GroupCoordinator
from ingest.metadata.memory import MemoryMetadataStore

from .conftest import SESSION_MS, Harness, make_config, settle


async def test_session_expiry_removes_member_and_triggers_rebalance(harness: Harness) -> None:
    a, b = await harness.form_group(2)
    for _ in range(3):
        await harness.advance(SESSION_MS * 0.6)
        assert await harness.heartbeat(a.member_id, a.generation_id) in (
            ErrorCode.none,
            ErrorCode.rebalance_in_progress,
        )
    # b never heartbeated: it is gone and a must rejoin.
    assert await harness.heartbeat(a.member_id, a.generation_id) == ErrorCode.rebalance_in_progress
    assert await harness.heartbeat(b.member_id, b.generation_id) == ErrorCode.unknown_member_id
    ra = await harness.join(a.member_id)
    assert [m.member_id for m in ra.members] == [a.member_id]


async def test_heartbeats_keep_a_member_alive(harness: Harness) -> None:
    (a,) = await harness.form_group(1)
    for _ in range(10):
        await harness.advance(SESSION_MS / 2)
        assert await harness.heartbeat(a.member_id, a.generation_id) == ErrorCode.none


async def test_last_member_expiry_leaves_the_group_empty(harness: Harness) -> None:
    await harness.form_group(1)
    await harness.advance(SESSION_MS + 1)
    (desc,) = await harness.coord.describe_groups(["g"])
    assert desc.state == "Empty"
    assert desc.members == []


async def test_member_that_never_syncs_is_removed_after_rebalance_timeout(
    harness: Harness,
) -> None:
    a = await harness.join(session_ms=10_000)
    b_task = harness.join(session_ms=10_000)
    await settle()
    await harness.join(a.member_id, session_ms=10_000)
    b = await b_task
    await harness.sync(a.member_id, b.generation_id, {})
    # b heartbeats but never sends SyncGroup.
    for _ in range(4):
        await harness.advance(100)
        await harness.heartbeat(b.member_id, b.generation_id)
    assert await harness.heartbeat(b.member_id, b.generation_id) == ErrorCode.unknown_member_id


async def test_session_expiry_with_the_real_clock() -> None:
    coord = GroupCoordinator(MemoryMetadataStore(), make_config(), timer_max_sleep=0.05)
    await coord.start()
    try:
        joined = await coord.join_group(
            group_id="g",
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[("range", b"")],
            session_timeout_ms=100,
            rebalance_timeout_ms=100,
            client_id="c",
            client_host="h",
            require_known_member_id=False,
        )
        assert joined.error_code == ErrorCode.none
        await coord.sync_group(
            group_id="g",
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            group_instance_id=None,
            protocol_type=None,
            protocol_name=None,
            assignments={},
        )
        await asyncio.sleep(0.3)
        (desc,) = await coord.describe_groups(["g"])
        assert desc.state == "Empty"
    finally:
        await coord.close()


async def test_rebalance_completes_on_timeout_with_the_real_clock() -> None:
    coord = GroupCoordinator(MemoryMetadataStore(), make_config(), timer_max_sleep=5)

    def join(member_id: str) -> asyncio.Task[object]:
        return asyncio.create_task(
            coord.join_group(
                group_id="g",
                member_id=member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocols=[("range", b"")],
                session_timeout_ms=10_000,
                rebalance_timeout_ms=150,
                client_id="c",
                client_host="h",
                require_known_member_id=False,
            )
        )

    await coord.start()
    try:
        first = await join("")
        second = join("")  # the first member never rejoins
        result = await asyncio.wait_for(second, timeout=2)
        assert getattr(result, "generation_id", None) == getattr(first, "generation_id", 0) + 1
    finally:
        await coord.close()


@pytest.mark.parametrize("config", [make_config(empty_group_retention_ms=1_000)])
async def test_idle_empty_group_is_forgotten_but_its_offsets_stay(
    harness: Harness, config: GroupConfig
) -> None:
    await harness.commit("", -1, [("t", 0, 1, -1, None)])
    a = await harness.join(group="members")
    await harness.coord.leave_group(group_id="members", members=[(a.member_id, None)])
    (desc,) = await harness.coord.describe_groups(["members"])
    assert (desc.state, desc.protocol_type) == ("Empty", "consumer")
    await harness.advance(1_001)
    (desc,) = await harness.coord.describe_groups(["members"])
    assert desc.state == "Dead"
    assert ("g", "", "Empty") in await harness.coord.list_groups()
    fetched = await harness.coord.fetch_offsets(group_id="g", partitions=[("t", 0)])
    assert fetched.partitions[0].offset == 1
