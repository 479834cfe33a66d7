"""JoinGroup / SyncGroup / Heartbeat / LeaveGroup rules."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from ingest.group import GroupConfig

from .conftest import SESSION_MS, Harness, make_config, settle


async def test_first_join_without_member_id_gets_member_id_required(harness: Harness) -> None:
    first = await harness.join(require_known=True, client_id="c1")
    assert first.error_code == ErrorCode.member_id_required
    assert first.member_id.startswith("c1-")
    again = await harness.join(first.member_id, require_known=True)
    assert again.error_code == ErrorCode.none
    assert again.member_id == first.member_id
    assert again.generation_id == 1
    assert again.leader == first.member_id


async def test_join_with_unknown_member_id_is_rejected(harness: Harness) -> None:
    result = await harness.join("nobody")
    assert result.error_code == ErrorCode.unknown_member_id


@pytest.mark.parametrize("config", [make_config(group_initial_rebalance_delay_ms=100)])
async def test_two_members_join_and_get_the_same_generation_and_leader(
    harness: Harness, config: GroupConfig
) -> None:
    a = harness.join(client_id="a")
    b = harness.join(client_id="b")
    await settle()
    assert not a.done() and not b.done()  # held by the initial rebalance delay
    await harness.advance(100)
    assert not a.done()  # b joined during the delay: it is extended once more
    await harness.advance(100)
    ra, rb = await a, await b
    assert ra.error_code == rb.error_code == ErrorCode.none
    assert ra.generation_id == rb.generation_id == 1
    assert ra.leader == rb.leader == ra.member_id
    assert ra.protocol_name == rb.protocol_name == "range"
    assert [m.member_id for m in ra.members] == [ra.member_id, rb.member_id]
    assert rb.members == []


async def test_leader_sync_assignment_is_delivered_to_every_member(harness: Harness) -> None:
    leader, follower = await harness.form_group(2)
    gen = leader.generation_id
    # A second round of SyncGroup in a Stable group returns the stored assignment.
    follower_sync = await harness.sync(follower.member_id, gen)
    assert follower_sync.error_code == ErrorCode.none
    assert follower_sync.assignment == follower.member_id.encode()
    assert follower_sync.protocol_name == "range"


async def test_follower_sync_waits_for_the_leader(harness: Harness) -> None:
    a = await harness.join()
    b_task = harness.join()
    await settle()
    a2 = await harness.join(a.member_id)
    b = await b_task
    follower = harness.sync(b.member_id, b.generation_id)
    await settle()
    assert not follower.done()
    leader = await harness.sync(
        a.member_id, a2.generation_id, {b.member_id: b"B", a.member_id: b"A"}
    )
    assert leader.assignment == b"A"
    assert (await follower).assignment == b"B"
    desc = (await harness.coord.describe_groups(["g"]))[0]
    assert desc.state == "Stable"


async def test_third_member_join_triggers_rebalance(harness: Harness) -> None:
    a, b = await harness.form_group(2)
    gen = a.generation_id
    c_task = harness.join(client_id="c")
    await settle()
    assert not c_task.done()
    assert await harness.heartbeat(a.member_id, gen) == ErrorCode.rebalance_in_progress
    assert await harness.heartbeat(b.member_id, gen) == ErrorCode.rebalance_in_progress
    a_task, b_task = harness.join(a.member_id), harness.join(b.member_id)
    ra, rb, rc = await a_task, await b_task, await c_task
    assert ra.generation_id == rb.generation_id == rc.generation_id == gen + 1
    assert ra.leader == a.member_id
    assert len(ra.members) == 3
    assert await harness.heartbeat(a.member_id, gen) == ErrorCode.illegal_generation


async def test_sync_is_rejected_during_rebalance_and_with_wrong_generation(
    harness: Harness,
) -> None:
    a, _ = await harness.form_group(2)
    gen = a.generation_id
    assert (await harness.sync(a.member_id, gen + 5)).error_code == ErrorCode.illegal_generation
    assert (await harness.sync("stranger", gen)).error_code == ErrorCode.unknown_member_id
    harness.join(client_id="c")
    await settle()
    assert (await harness.sync(a.member_id, gen)).error_code == ErrorCode.rebalance_in_progress


async def test_rebalance_during_completing_fails_waiting_syncs(harness: Harness) -> None:
    a = await harness.join()
    b_task = harness.join()
    await settle()
    a2 = await harness.join(a.member_id)
    b = await b_task
    follower = harness.sync(b.member_id, b.generation_id)
    await settle()
    harness.join(client_id="c")  # before the leader's SyncGroup
    assert (await follower).error_code == ErrorCode.rebalance_in_progress
    assert (await harness.sync(a.member_id, a2.generation_id)).error_code == (
        ErrorCode.rebalance_in_progress
    )


async def test_leave_group_triggers_rebalance_for_the_rest(harness: Harness) -> None:
    a, b = await harness.form_group(2)
    left = await harness.coord.leave_group(group_id="g", members=[(b.member_id, None)])
    assert left.error_code == ErrorCode.none
    assert left.members == [(b.member_id, None, 0)]
    assert await harness.heartbeat(a.member_id, a.generation_id) == ErrorCode.rebalance_in_progress
    ra = await harness.join(a.member_id)
    assert ra.generation_id == a.generation_id + 1
    assert [m.member_id for m in ra.members] == [a.member_id]
    unknown = await harness.coord.leave_group(group_id="g", members=[(b.member_id, None)])
    assert unknown.members[0].error_code == ErrorCode.unknown_member_id


async def test_leader_leaving_hands_leadership_to_a_remaining_member(harness: Harness) -> None:
    a, b = await harness.form_group(2)
    await harness.coord.leave_group(group_id="g", members=[(a.member_id, None)])
    rb = await harness.join(b.member_id)
    assert rb.leader == b.member_id
    assert [m.member_id for m in rb.members] == [b.member_id]


async def test_rebalance_timeout_removes_members_that_did_not_rejoin(harness: Harness) -> None:
    a, b = await harness.form_group(2)
    c_task = harness.join(client_id="c", session_ms=5_000)
    a_task = harness.join(a.member_id, session_ms=5_000)
    await settle()
    # b keeps heartbeating but never rejoins.
    for _ in range(3):
        await harness.advance(100)
        if not a_task.done():
            assert await harness.heartbeat(b.member_id, b.generation_id) == (
                ErrorCode.rebalance_in_progress
            )
    ra, rc = await a_task, await c_task
    assert ra.error_code == rc.error_code == ErrorCode.none
    assert {m.member_id for m in ra.members} == {a.member_id, rc.member_id}
    assert await harness.heartbeat(b.member_id, ra.generation_id) == ErrorCode.unknown_member_id


async def test_inconsistent_protocols_are_rejected(harness: Harness) -> None:
    await harness.join(protocols=[("range", b"")])
    other = await harness.join(protocols=[("roundrobin", b"")])
    assert other.error_code == ErrorCode.inconsistent_group_protocol
    other_type = await harness.join(protocol_type="connect")
    assert other_type.error_code == ErrorCode.inconsistent_group_protocol
    empty = await harness.join(group="h", protocols=[])
    assert empty.error_code == ErrorCode.inconsistent_group_protocol


async def test_session_timeout_out_of_bounds_is_rejected(harness: Harness) -> None:
    low = await harness.join(session_ms=5)
    high = await harness.join(session_ms=120_000)
    assert low.error_code == high.error_code == ErrorCode.invalid_session_timeout


async def test_protocol_chosen_is_common_and_most_preferred(harness: Harness) -> None:
    a = await harness.join(protocols=[("sticky", b"s"), ("range", b"r"), ("rr", b"x")])
    b_task = harness.join(protocols=[("range", b"r"), ("rr", b"x")])
    c_task = harness.join(protocols=[("range", b"r"), ("sticky", b"s")])
    await settle()
    ra = await harness.join(a.member_id, protocols=[("sticky", b"s"), ("range", b"r")])
    await b_task, await c_task
    assert ra.protocol_name == "range"
    assert {m.metadata for m in ra.members} == {b"r"}


async def test_follower_rejoin_in_stable_group_does_not_rebalance(harness: Harness) -> None:
    a, b = await harness.form_group(2)
    again = await harness.join(b.member_id)
    assert again.generation_id == b.generation_id
    assert again.members == []
    assert await harness.heartbeat(a.member_id, a.generation_id) == ErrorCode.none


async def test_pending_member_that_never_rejoins_expires(harness: Harness) -> None:
    a, _ = await harness.form_group(2)
    pending = await harness.join(require_known=True)
    assert pending.error_code == ErrorCode.member_id_required
    await harness.advance(SESSION_MS + 1)
    # The pending id is gone; it would now be an unknown member.
    result = await harness.join(pending.member_id)
    assert result.error_code == ErrorCode.unknown_member_id


@pytest.mark.parametrize("config", [make_config(group_max_size=2)])
async def test_join_beyond_group_max_size_is_rejected(
    harness: Harness, config: GroupConfig
) -> None:
    await harness.form_group(2)
    third = await harness.join()
    assert third.error_code == ErrorCode.group_max_size_reached


async def test_close_fails_pending_joins_with_not_coordinator(harness: Harness) -> None:
    await harness.form_group(2)
    waiting = harness.join()
    await settle()
    await harness.coord.close()
    assert (await waiting).error_code == ErrorCode.not_coordinator
    after = await harness.join()
    assert after.error_code == ErrorCode.coordinator_not_available


async def test_rejoin_during_completing_rebalance_resends_the_join_response(
    harness: Harness,
) -> None:
    a = await harness.join()
    again = await harness.join(a.member_id)  # lost the response before SyncGroup
    assert again.generation_id == a.generation_id
    assert [m.member_id for m in again.members] == [a.member_id]
    (desc,) = await harness.coord.describe_groups(["g"])
    assert desc.state == "CompletingRebalance"


async def test_pending_member_leaving_unblocks_the_rebalance(harness: Harness) -> None:
    a, _ = await harness.form_group(2)
    pending = await harness.join(require_known=True)
    rejoins = [harness.join(r.member_id) for r in (a, _)]
    await settle()
    assert not any(t.done() for t in rejoins)  # waiting for the pending member
    left = await harness.coord.leave_group(group_id="g", members=[(pending.member_id, None)])
    assert left.members[0].error_code == ErrorCode.none
    results = [await t for t in rejoins]
    assert {r.generation_id for r in results} == {a.generation_id + 1}


async def test_cancelled_join_keeps_the_member_in_the_rebalance(harness: Harness) -> None:
    a, b = await harness.form_group(2)
    c = harness.join()
    await settle()
    a_join = harness.join(a.member_id)
    await settle()
    a_join.cancel()  # the client's connection dropped
    await settle()
    rb = await harness.join(b.member_id)
    rc = await c
    assert rb.generation_id == rc.generation_id == a.generation_id + 1
    assert rb.leader == a.member_id
    assert {m.member_id for m in rc.members} == set()
