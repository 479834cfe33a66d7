"""The transaction coordinator's state machine, over the in-memory store with
a recording marker writer and offset sink."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from ingest.protocol.errors import ErrorCode
from ingest.txn import (
    MemoryTxnStore,
    PendingOffset,
    TransactionCoordinator,
    TxnConfig,
    TxnState,
)

OK = ErrorCode.none
P0, P1 = ("orders", 0), ("orders", 1)


class Markers:
    def __init__(self) -> None:
        self.written: list[tuple[int, int, bool, tuple[tuple[str, int], ...]]] = []
        self.failing: set[tuple[str, int]] = set()

    async def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: Sequence[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        out = {}
        for tp in partitions:
            out[tp] = ErrorCode.not_leader_or_follower if tp in self.failing else OK
        done = tuple(tp for tp in partitions if tp not in self.failing)
        self.written.append((producer_id, producer_epoch, commit, done))
        return out


class Offsets:
    def __init__(self) -> None:
        self.committed: dict[str, list[PendingOffset]] = {}

    async def commit_transactional_offsets(
        self, group: str, offsets: Sequence[PendingOffset]
    ) -> None:
        self.committed.setdefault(group, []).extend(offsets)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


class Harness:
    def __init__(self, store: MemoryTxnStore | None = None) -> None:
        self.store = store or MemoryTxnStore()
        self.markers = Markers()
        self.offsets = Offsets()
        self.clock = Clock()
        self._next = iter(range(100, 10_000))
        self.coord = TransactionCoordinator(
            self.store,
            self.markers,
            self.offsets,
            lambda: next(self._next),
            TxnConfig(max_timeout_ms=60_000, sweep_interval_s=3600),
            clock_ms=self.clock,
        )


@pytest.fixture
def h() -> Harness:
    return Harness()


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_init_gives_a_producer_id_and_each_new_producer_a_higher_epoch(h: Harness) -> None:
    async def go() -> None:
        first = await h.coord.init_producer_id("t", 10_000)
        again = await h.coord.init_producer_id("t", 10_000)
        other = await h.coord.init_producer_id("u", 10_000)
        assert (first.error, first.producer_epoch) == (OK, 0)
        assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)
        assert other.producer_id != first.producer_id

    run(go())


def test_a_timeout_past_the_maximum_or_not_positive_is_refused(h: Harness) -> None:
    async def go() -> None:
        assert (
            await h.coord.init_producer_id("t", 60_001)
        ).error == ErrorCode.invalid_transaction_timeout
        assert (
            await h.coord.init_producer_id("t", 0)
        ).error == ErrorCode.invalid_transaction_timeout

    run(go())


def test_commit_writes_commit_markers_then_applies_the_offsets(h: Harness) -> None:
    async def go() -> None:
        r = await h.coord.init_producer_id("t", 10_000)
        pid, ep = r.producer_id, r.producer_epoch
        assert await h.coord.add_partitions("t", pid, ep, [P0, P1]) == OK
        assert await h.coord.add_offsets("t", pid, ep, "g") == OK
        assert h.coord.pending_offsets("g") == set()
        offs = [PendingOffset("in", 0, 41)]
        assert await h.coord.commit_offsets("t", pid, ep, "g", offs) == OK
        assert h.coord.pending_offsets("g") == {("in", 0)}
        assert h.offsets.committed == {}  # not before the commit
        assert await h.coord.end_txn("t", pid, ep, commit=True) == OK
        assert h.markers.written == [(pid, ep, True, (P0, P1))]
        assert h.offsets.committed == {"g": offs}
        assert h.coord.pending_offsets("g") == set()
        rec = h.store.get("t")
        assert rec is not None and rec.state is TxnState.COMPLETE_COMMIT and not rec.partitions
        # a retried EndTxn is answered as the first; the other outcome is not
        assert await h.coord.end_txn("t", pid, ep, commit=True) == OK
        assert await h.coord.end_txn("t", pid, ep, commit=False) == ErrorCode.invalid_txn_state
        assert len(h.markers.written) == 1

    run(go())


def test_abort_writes_abort_markers_and_drops_the_offsets(h: Harness) -> None:
    async def go() -> None:
        r = await h.coord.init_producer_id("t", 10_000)
        pid, ep = r.producer_id, r.producer_epoch
        await h.coord.add_partitions("t", pid, ep, [P0])
        await h.coord.add_offsets("t", pid, ep, "g")
        await h.coord.commit_offsets("t", pid, ep, "g", [PendingOffset("in", 0, 5)])
        assert await h.coord.end_txn("t", pid, ep, commit=False) == OK
        assert h.markers.written == [(pid, ep, False, (P0,))]
        assert h.offsets.committed == {}
        assert h.coord.pending_offsets("g") == set()

    run(go())


def test_end_without_a_transaction_and_offsets_without_add_offsets_are_invalid(h: Harness) -> None:
    async def go() -> None:
        r = await h.coord.init_producer_id("t", 10_000)
        pid, ep = r.producer_id, r.producer_epoch
        assert await h.coord.end_txn("t", pid, ep, commit=True) == ErrorCode.invalid_txn_state
        await h.coord.add_partitions("t", pid, ep, [P0])
        got = await h.coord.commit_offsets("t", pid, ep, "g", [PendingOffset("in", 0, 1)])
        assert got == ErrorCode.invalid_txn_state

    run(go())


def test_unknown_producer_ids_and_old_epochs_are_refused(h: Harness) -> None:
    async def go() -> None:
        r = await h.coord.init_producer_id("t", 10_000)
        assert await h.coord.add_partitions("t", r.producer_id + 1, 0, [P0]) == (
            ErrorCode.invalid_producer_id_mapping
        )
        assert await h.coord.add_partitions("nope", r.producer_id, 0, [P0]) == (
            ErrorCode.invalid_producer_id_mapping
        )
        assert (
            await h.coord.add_partitions("t", r.producer_id, 7, [P0]) == ErrorCode.producer_fenced
        )

    run(go())


def test_a_new_producer_fences_the_zombie_and_aborts_its_transaction(h: Harness) -> None:
    async def go() -> None:
        zombie = await h.coord.init_producer_id("t", 10_000)
        pid, ep = zombie.producer_id, zombie.producer_epoch
        await h.coord.add_partitions("t", pid, ep, [P0, P1])
        assert h.coord.produce_check("t", pid, ep, P0) == OK
        fresh = await h.coord.init_producer_id("t", 10_000)
        assert fresh.error == OK and fresh.producer_id == pid
        # the open transaction was aborted with a bumped epoch (fencing the
        # zombie in every partition), and the new producer got one more
        assert h.markers.written == [(pid, ep + 1, False, (P0, P1))]
        assert fresh.producer_epoch == ep + 2
        assert await h.coord.add_partitions("t", pid, ep, [P0]) == ErrorCode.producer_fenced
        assert await h.coord.end_txn("t", pid, ep, commit=True) == ErrorCode.producer_fenced
        assert h.coord.produce_check("t", pid, ep, P0) == ErrorCode.invalid_producer_epoch
        # the new producer goes on
        assert await h.coord.add_partitions("t", pid, fresh.producer_epoch, [P1]) == OK
        assert (
            h.coord.produce_check("t", pid, fresh.producer_epoch, P0) == ErrorCode.invalid_txn_state
        )
        assert h.coord.produce_check("t", pid, fresh.producer_epoch, P1) == OK

    run(go())


def test_a_retried_init_with_the_epoch_it_replaced_gets_the_same_answer(h: Harness) -> None:
    async def go() -> None:
        r = await h.coord.init_producer_id("t", 10_000)
        bumped = await h.coord.init_producer_id("t", 10_000, r.producer_id, r.producer_epoch)
        assert bumped.producer_epoch == r.producer_epoch + 1
        retry = await h.coord.init_producer_id("t", 10_000, r.producer_id, r.producer_epoch)
        assert (retry.error, retry.producer_epoch) == (OK, bumped.producer_epoch)
        stale = await h.coord.init_producer_id("t", 10_000, r.producer_id, 99)
        assert stale.error == ErrorCode.producer_fenced

    run(go())


def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced(h: Harness) -> None:
    async def go() -> None:
        r = await h.coord.init_producer_id("t", 5_000)
        pid, ep = r.producer_id, r.producer_epoch
        await h.coord.add_partitions("t", pid, ep, [P0])
        h.clock.ms += 4_000
        await h.coord._sweep()
        assert h.markers.written == []
        h.clock.ms += 2_000
        await h.coord._sweep()
        assert h.markers.written == [(pid, ep + 1, False, (P0,))]
        assert await h.coord.end_txn("t", pid, ep, commit=True) == ErrorCode.producer_fenced
        described = await h.coord.describe("t")
        assert described is not None and described.state is TxnState.COMPLETE_ABORT

    run(go())


def test_a_marker_that_cannot_be_written_is_retried_and_holds_the_next_transaction(
    h: Harness,
) -> None:
    async def go() -> None:
        r = await h.coord.init_producer_id("t", 10_000)
        pid, ep = r.producer_id, r.producer_epoch
        await h.coord.add_partitions("t", pid, ep, [P0, P1])
        h.markers.failing = {P1}
        assert await h.coord.end_txn("t", pid, ep, commit=True) == OK  # decided and stored
        rec = h.store.get("t")
        assert rec is not None and rec.state is TxnState.PREPARE_COMMIT
        assert await h.coord.add_partitions("t", pid, ep, [P0]) == ErrorCode.concurrent_transactions
        h.markers.failing = set()
        await h.coord._sweep()
        rec = h.store.get("t")
        assert rec is not None and rec.state is TxnState.COMPLETE_COMMIT
        assert h.markers.written[-1] == (pid, ep, True, (P0, P1))
        assert await h.coord.add_partitions("t", pid, ep, [P0]) == OK

    run(go())


def test_a_restarted_coordinator_finishes_what_a_crash_left_prepared() -> None:
    first = Harness()

    async def before_crash() -> tuple[int, int]:
        r = await first.coord.init_producer_id("t", 10_000)
        pid, ep = r.producer_id, r.producer_epoch
        await first.coord.add_partitions("t", pid, ep, [P0])
        await first.coord.add_offsets("t", pid, ep, "g")
        await first.coord.commit_offsets("t", pid, ep, "g", [PendingOffset("in", 0, 9)])
        first.markers.failing = {P0}  # the crash: markers never written
        await first.coord.end_txn("t", pid, ep, commit=True)
        return pid, ep

    pid, ep = run(before_crash())
    second = Harness(first.store)

    async def after_restart() -> None:
        await second.coord.start()
        try:
            assert second.markers.written == [(pid, ep, True, (P0,))]
            assert second.offsets.committed == {"g": [PendingOffset("in", 0, 9)]}
            rec = second.store.get("t")
            assert rec is not None and rec.state is TxnState.COMPLETE_COMMIT
        finally:
            await second.coord.close()

    run(after_restart())


def test_an_ongoing_transaction_survives_a_restart_and_can_still_commit() -> None:
    first = Harness()

    async def before() -> tuple[int, int]:
        r = await first.coord.init_producer_id("t", 10_000)
        await first.coord.add_partitions("t", r.producer_id, r.producer_epoch, [P0])
        return r.producer_id, r.producer_epoch

    pid, ep = run(before())
    second = Harness(first.store)

    async def after() -> None:
        await second.coord.start()
        try:
            assert second.coord.produce_check("t", pid, ep, P0) == OK
            assert await second.coord.end_txn("t", pid, ep, commit=True) == OK
            assert second.markers.written == [(pid, ep, True, (P0,))]
        finally:
            await second.coord.close()

    run(after())


def test_verify_only_answers_whether_each_partition_is_in_the_transaction(h: Harness) -> None:
    async def go() -> None:
        r = await h.coord.init_producer_id("t", 10_000)
        pid, ep = r.producer_id, r.producer_epoch
        await h.coord.add_partitions("t", pid, ep, [P0])
        got = await h.coord.verify_partitions("t", pid, ep, [P0, P1])
        assert got == {P0: OK, P1: ErrorCode.invalid_txn_state}

    run(go())
