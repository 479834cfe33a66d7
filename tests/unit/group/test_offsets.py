"""OffsetCommit / OffsetFetch rules."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import pytest
from kio.schema.errors import ErrorCode

from ingest.group import GroupConfig, GroupCoordinator
from ingest.metadata.api import CommittedOffset

from .conftest import FakeClock, Harness, make_config, settle


async def test_unknown_group_offset_fetch_returns_minus_one(harness: Harness) -> None:
    result = await harness.coord.fetch_offsets(group_id="nope", partitions=[("t", 0), ("t", 1)])
    assert result.error_code == ErrorCode.none
    assert result.partitions == [("t", 0, -1, -1, "", 0), ("t", 1, -1, -1, "", 0)]


async def test_standalone_commit_is_durable_and_fetchable(harness: Harness) -> None:
    codes = await harness.commit("", -1, [("t", 0, 42, 3, "meta"), ("t", 1, 7, -1, None)])
    assert codes == {("t", 0): 0, ("t", 1): 0}
    stored = harness.store.fetch_offsets("g")
    assert [(o.topic, o.partition, o.offset, o.leader_epoch) for o in stored] == [
        ("t", 0, 42, 3),
        ("t", 1, 7, -1),
    ]
    some = await harness.coord.fetch_offsets(group_id="g", partitions=[("t", 0), ("u", 0)])
    assert some.partitions == [("t", 0, 42, 3, "meta", 0), ("u", 0, -1, -1, "", 0)]
    every = await harness.coord.fetch_offsets(group_id="g", partitions=None)
    assert [(p.topic, p.partition, p.offset) for p in every.partitions] == [
        ("t", 0, 42),
        ("t", 1, 7),
    ]


async def test_commit_from_outdated_generation_is_rejected(harness: Harness) -> None:
    a, _ = await harness.form_group(2)
    old_gen = a.generation_id
    c_task = harness.join()
    await settle()
    rejoined = [harness.join(r.member_id) for r in (a, _)]
    for t in rejoined:
        await t
    await c_task
    codes = await harness.commit(a.member_id, old_gen, [("t", 0, 1, -1, None)])
    assert codes == {("t", 0): ErrorCode.illegal_generation}
    assert harness.store.fetch_offsets("g") == []


async def test_commit_by_member_of_current_generation_is_accepted(harness: Harness) -> None:
    a, _ = await harness.form_group(2)
    codes = await harness.commit(a.member_id, a.generation_id, [("t", 0, 5, 0, "")])
    assert codes == {("t", 0): 0}


async def test_commit_while_preparing_rebalance_is_accepted(harness: Harness) -> None:
    # Consumers commit in onPartitionsRevoked, before they rejoin.
    a, _ = await harness.form_group(2)
    harness.join()
    await settle()
    codes = await harness.commit(a.member_id, a.generation_id, [("t", 0, 5, 0, "")])
    assert codes == {("t", 0): 0}


async def test_commit_during_completing_rebalance_returns_rebalance_in_progress(
    harness: Harness,
) -> None:
    a = await harness.join()
    codes = await harness.commit(a.member_id, a.generation_id, [("t", 0, 5, 0, "")])
    assert codes == {("t", 0): ErrorCode.rebalance_in_progress}


async def test_anonymous_commit_to_group_with_members_is_rejected(harness: Harness) -> None:
    await harness.form_group(1)
    codes = await harness.commit("", -1, [("t", 0, 5, 0, "")])
    assert codes == {("t", 0): ErrorCode.illegal_generation}


async def test_commit_by_unknown_member_is_rejected(harness: Harness) -> None:
    a, _ = await harness.form_group(2)
    codes = await harness.commit("stranger", a.generation_id, [("t", 0, 5, 0, "")])
    assert codes == {("t", 0): ErrorCode.unknown_member_id}


async def test_commit_with_generation_to_unknown_group_is_rejected(harness: Harness) -> None:
    codes = await harness.commit("m", 3, [("t", 0, 5, 0, "")], group="ghost")
    assert codes == {("t", 0): ErrorCode.illegal_generation}


@pytest.mark.parametrize("config", [make_config(max_metadata_bytes=4)])
async def test_oversized_metadata_is_rejected_per_partition(
    harness: Harness, config: GroupConfig
) -> None:
    codes = await harness.commit("", -1, [("t", 0, 1, -1, "toolong"), ("t", 1, 2, -1, "ok")])
    assert codes == {("t", 0): ErrorCode.offset_metadata_too_large, ("t", 1): 0}
    assert [o.partition for o in harness.store.fetch_offsets("g")] == [1]


async def test_empty_group_id_is_invalid(harness: Harness) -> None:
    codes = await harness.commit("", -1, [("t", 0, 1, -1, None)], group="")
    assert codes == {("t", 0): ErrorCode.invalid_group_id}
    fetched = await harness.coord.fetch_offsets(group_id="", partitions=None)
    assert fetched.error_code == ErrorCode.invalid_group_id


class ThreadCheckingStore:
    """Records which thread each store call ran on."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.offsets: dict[str, list[CommittedOffset]] = {}

    def commit_offsets(self, group: str, offsets: Sequence[CommittedOffset]) -> None:
        self.threads.append(threading.current_thread())
        self.offsets.setdefault(group, []).extend(offsets)

    def fetch_offsets(
        self, group: str, topics: Iterable[str] | None = None
    ) -> list[CommittedOffset]:
        self.threads.append(threading.current_thread())
        return list(self.offsets.get(group, []))

    def delete_group_offsets(self, group: str) -> None:
        self.threads.append(threading.current_thread())
        self.offsets.pop(group, None)

    def list_offset_groups(self) -> list[str]:
        self.threads.append(threading.current_thread())
        return sorted(self.offsets)


class FailingStore(ThreadCheckingStore):
    def commit_offsets(self, group: str, offsets: Sequence[CommittedOffset]) -> None:
        raise OSError("disk on fire")


async def test_store_calls_run_off_the_event_loop() -> None:
    store = ThreadCheckingStore()
    coord = GroupCoordinator(store, make_config(), FakeClock())
    await coord.commit_offsets(
        group_id="g",
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        offsets=[("t", 0, 1, -1, None)],
    )
    await coord.fetch_offsets(group_id="g", partitions=None)
    await coord.list_groups()
    await coord.delete_groups(["g"])
    await coord.close()
    assert len(store.threads) >= 4
    assert threading.main_thread() not in store.threads


async def test_failed_store_write_is_not_acknowledged() -> None:
    coord = GroupCoordinator(FailingStore(), make_config(), FakeClock())
    codes = await coord.commit_offsets(
        group_id="g",
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        offsets=[("t", 0, 1, -1, None)],
    )
    await coord.close()
    assert codes == {("t", 0): ErrorCode.coordinator_not_available}


class BrokenStore(ThreadCheckingStore):
    def fetch_offsets(
        self, group: str, topics: Iterable[str] | None = None
    ) -> list[CommittedOffset]:
        raise OSError("disk on fire")

    def list_offset_groups(self) -> list[str]:
        raise OSError("disk on fire")


async def test_store_read_failures_give_retriable_errors() -> None:
    coord = GroupCoordinator(BrokenStore(), make_config(), FakeClock())
    fetched = await coord.fetch_offsets(group_id="g", partitions=None)
    (desc,) = await coord.describe_groups(["g"])
    deleted = await coord.delete_groups(["g"])
    await coord.close()
    assert fetched.error_code == ErrorCode.coordinator_not_available
    assert desc.error_code == ErrorCode.coordinator_not_available
    assert deleted == {"g": ErrorCode.coordinator_not_available}
