"""Static membership (group.instance.id, KIP-345)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .conftest import Harness, settle


async def _static_group(harness: Harness) -> tuple[str, str, int]:
    a = await harness.join(instance="i-a")
    b_task = harness.join(instance="i-b")
    await settle()
    a2 = await harness.join(a.member_id, instance="i-a")
    b = await b_task
    gen = a2.generation_id
    assignments = {a.member_id: b"A", b.member_id: b"B"}
    s_a = harness.sync(a.member_id, gen, assignments, instance="i-a")
    s_b = harness.sync(b.member_id, gen, instance="i-b")
    assert (await s_a).assignment == b"A"
    assert (await s_b).assignment == b"B"
    return a.member_id, b.member_id, gen


async def test_static_member_rejoin_keeps_generation_and_fences_old_member_id(
    harness: Harness,
) -> None:
    a_id, b_id, gen = await _static_group(harness)
    rejoin = await harness.join(instance="i-b")  # b restarted: no member id
    assert rejoin.error_code == ErrorCode.none
    assert rejoin.member_id != b_id
    assert rejoin.generation_id == gen
    assert rejoin.members == [] and not rejoin.skip_assignment
    # No rebalance: the other member keeps going, the new id gets b's assignment.
    assert await harness.heartbeat(a_id, gen, instance="i-a") == ErrorCode.none
    sync = await harness.sync(rejoin.member_id, gen, instance="i-b")
    assert sync.assignment == b"B"
    # The old member id is fenced.
    assert await harness.heartbeat(b_id, gen, instance="i-b") == ErrorCode.fenced_instance_id
    codes = await harness.commit(b_id, gen, [("t", 0, 1, -1, None)], instance="i-b")
    assert codes == {("t", 0): ErrorCode.fenced_instance_id}
    assert (await harness.join(b_id, instance="i-b")).error_code == ErrorCode.fenced_instance_id


async def test_static_leader_rejoin_is_told_to_skip_assignment(harness: Harness) -> None:
    a_id, _, gen = await _static_group(harness)
    rejoin = await harness.join(instance="i-a")
    assert rejoin.generation_id == gen
    assert rejoin.leader == rejoin.member_id
    assert rejoin.skip_assignment
    assert len(rejoin.members) == 2


async def test_static_member_leaves_by_instance_id(harness: Harness) -> None:
    a_id, b_id, gen = await _static_group(harness)
    result = await harness.coord.leave_group(group_id="g", members=[("", "i-b")])
    assert result.members == [("", "i-b", 0)]
    assert await harness.heartbeat(a_id, gen, instance="i-a") == ErrorCode.rebalance_in_progress
    wrong = await harness.coord.leave_group(group_id="g", members=[("other", "i-a")])
    assert wrong.members[0].error_code == ErrorCode.fenced_instance_id
    gone = await harness.coord.leave_group(group_id="g", members=[("", "i-b")])
    assert gone.members[0].error_code == ErrorCode.unknown_member_id


async def test_static_rejoin_keeping_the_selected_protocol_does_not_rebalance(
    harness: Harness,
) -> None:
    a_id, b_id, gen = await _static_group(harness)
    rejoin = harness.join(instance="i-b", protocols=[("range", b"new")])
    await settle()
    assert rejoin.done() and (await rejoin).generation_id == gen
    # "rr" is not supported by i-b, so "range" stays selected.
    changed = harness.join(instance="i-a", protocols=[("rr", b""), ("range", b"")])
    await settle()
    assert changed.done() and (await changed).generation_id == gen


async def test_static_rejoin_changing_the_selected_protocol_rebalances(harness: Harness) -> None:
    a = await harness.join(instance="i-a", protocols=[("range", b""), ("rr", b"")])
    await harness.sync(a.member_id, a.generation_id, {a.member_id: b"A"}, instance="i-a")
    rejoin = await harness.join(instance="i-a", protocols=[("rr", b"")])
    assert rejoin.generation_id == a.generation_id + 1
    assert rejoin.protocol_name == "rr"
    assert not rejoin.skip_assignment
