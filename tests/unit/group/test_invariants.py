"""Random request sequences keep the group's bookkeeping consistent and its timers armed."""

from __future__ import annotations

import asyncio
import math

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ingest.group import GroupCoordinator, GroupState
from ingest.group.group import Group
from ingest.metadata.memory import MemoryMetadataStore

from .conftest import FakeClock, make_config

PROTOCOL_SETS = [[("range", b"r")], [("rr", b"x"), ("range", b"r")], [("rr", b"x")]]

op = st.one_of(
    st.tuples(
        st.just("join"),
        st.integers(0, 3),
        st.sampled_from([None, "i1", "i2"]),
        st.integers(0, 2),
        st.booleans(),
    ),
    st.tuples(st.just("rejoin"), st.integers(0, 7), st.integers(0, 2)),
    st.tuples(st.just("sync"), st.integers(0, 7)),
    st.tuples(st.just("heartbeat"), st.integers(0, 7)),
    st.tuples(st.just("leave"), st.integers(0, 7)),
    st.tuples(st.just("commit"), st.integers(0, 7)),
    st.tuples(st.just("advance"), st.integers(1, 400)),
)


def check(coord: GroupCoordinator, group: Group | None) -> None:
    if group is None:
        return
    recount: dict[str, int] = {}
    for m in group.members.values():
        for name in set(m.protocol_names()):
            recount[name] = recount.get(name, 0) + 1
    assert dict(group._protocol_counts) == recount
    assert (group.leader_id is None) == (not group.members) or group.state is GroupState.EMPTY
    if group.members:
        assert group.leader_id in group.members
    if group.state is GroupState.EMPTY:
        assert not group.members
    for instance, member_id in group.static_members.items():
        assert group.members[member_id].group_instance_id == instance
    assert group.pending_sync <= set(group.members)
    if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
        assert all(m.join_waiter is None for m in group.members.values())
    if group.state is GroupState.STABLE:
        assert all(m.sync_waiter is None for m in group.members.values())
    if group.state is GroupState.PREPARING_REBALANCE:
        assert group.join_deadline is not None
    # Liveness: the next deadline is armed in the timer heap.
    nxt = group.next_deadline()
    if not math.isinf(nxt):
        heap = coord._timer._heap
        assert any(g is group and t <= max(nxt, coord._clock() + 0.05) for t, _, g in heap)


async def scenario(ops: list[tuple[object, ...]]) -> None:
    clock = FakeClock()
    coord = GroupCoordinator(MemoryMetadataStore(), make_config(), clock, timer_max_sleep=60)
    ids: list[str] = []
    gens: dict[str, int] = {}
    tasks: list[asyncio.Task[object]] = []

    def pick(i: object) -> str:
        assert isinstance(i, int)
        return ids[i % len(ids)] if ids else "nobody"

    async def join(member_id: str, instance: str | None, protos: int, v4: bool) -> None:
        r = await coord.join_group(
            group_id="g",
            member_id=member_id,
            group_instance_id=instance,
            protocol_type="consumer",
            protocols=PROTOCOL_SETS[protos],
            session_timeout_ms=200,
            rebalance_timeout_ms=300,
            client_id="c",
            client_host="h",
            require_known_member_id=v4,
        )
        if r.member_id and r.member_id not in ids:
            ids.append(r.member_id)
        if r.error_code == 0:
            gens[r.member_id] = r.generation_id

    async def sync(member_id: str) -> None:
        await coord.sync_group(
            group_id="g",
            generation_id=gens.get(member_id, 0),
            member_id=member_id,
            group_instance_id=None,
            protocol_type=None,
            protocol_name=None,
            assignments={m: b"a" for m in ids},
        )

    await coord.start()
    try:
        for step in ops:
            kind = step[0]
            if kind == "join":
                _, _, instance, protos, v4 = step
                tasks.append(asyncio.create_task(join("", instance, protos, v4)))  # type: ignore[arg-type]
            elif kind == "rejoin":
                tasks.append(asyncio.create_task(join(pick(step[1]), None, step[2], True)))  # type: ignore[arg-type]
            elif kind == "sync":
                tasks.append(asyncio.create_task(sync(pick(step[1]))))
            elif kind == "heartbeat":
                m = pick(step[1])
                await coord.heartbeat(
                    group_id="g", generation_id=gens.get(m, 0), member_id=m, group_instance_id=None
                )
            elif kind == "leave":
                await coord.leave_group(group_id="g", members=[(pick(step[1]), None)])
            elif kind == "commit":
                m = pick(step[1])
                await coord.commit_offsets(
                    group_id="g",
                    generation_id=gens.get(m, -1),
                    member_id=m,
                    group_instance_id=None,
                    offsets=[("t", 0, 1, -1, None)],
                )
            else:
                assert isinstance(step[1], int)
                clock.now += step[1] / 1000
                coord.run_due_timers()
            for _ in range(5):
                await asyncio.sleep(0)
            group = coord._groups.get("g")
            check(coord, group)
            if group is not None:
                event(f"reached {group.state}")
        # With time passing, every waiting call eventually gets an answer.
        for _ in range(10):
            clock.now += 0.4
            coord.run_due_timers()
            for _ in range(5):
                await asyncio.sleep(0)
        assert all(t.done() for t in tasks)
        for t in tasks:
            t.result()
    finally:
        await coord.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, max_size=40))
def test_random_request_sequences_keep_invariants(ops: list[tuple[object, ...]]) -> None:
    asyncio.run(scenario(ops))
