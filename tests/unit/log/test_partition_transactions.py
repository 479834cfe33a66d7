"""Transactions inside a partition log: transactional batches, markers, the
LSO, read_committed reads, the aborted index, fencing, and the state after a
reopen (restart or partition move)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ingest.log.partition import PartitionLog
from ingest.log.topic_config import TopicConfigRegistry
from ingest.metadata import MemoryMetadataStore
from ingest.metadata.api import AbortedTxn, TxnCheckpoint
from ingest.protocol.errors import ErrorCode
from ingest.protocol.records import CONTROL_ABORT, build_batch, control_marker, split_batches
from ingest.s3stream import MemoryStreamEngine


@pytest.fixture
async def env() -> AsyncIterator[tuple[MemoryStreamEngine, MemoryMetadataStore]]:
    engine = MemoryStreamEngine()
    await engine.start()
    yield engine, MemoryMetadataStore()
    await engine.close()


async def _log(env: tuple[MemoryStreamEngine, MemoryMetadataStore]) -> PartitionLog:
    engine, store = env
    registry = TopicConfigRegistry.default()
    cfg = registry.resolved({})
    return PartitionLog("t", 0, await engine.create_stream(), lambda: cfg, txn_store=store)


def _reopen(log: PartitionLog, store: MemoryMetadataStore) -> PartitionLog:
    """What a restarted broker, or the next leader, builds over the same stream."""
    return PartitionLog("t", 0, log.stream, log._config, txn_store=store)


def _txn(pid: int, seq: int, n: int = 2, epoch: int = 0, value: bytes = b"v") -> bytes:
    return build_batch(
        [(None, value + b"%d" % i, [], 1000 + i) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        attributes=0x10,
    )


def _plain(n: int = 1) -> bytes:
    return build_batch([(None, b"p", [], 1000) for _ in range(n)])


async def _ok(log: PartitionLog, data: bytes) -> int:
    out = log.append(data)
    assert out.error == ErrorCode.none, out
    assert out.durable is not None
    await out.durable
    return out.base_offset


async def _marker(log: PartitionLog, pid: int, commit: bool, epoch: int = 0) -> int:
    out = log.write_marker(pid, epoch, commit, 0)
    assert out.error == ErrorCode.none, out
    assert out.durable is not None
    await out.durable
    return out.base_offset


async def _committed_values(log: PartitionLog) -> list[bytes | None]:
    from ingest.protocol.records import decode_records

    out: list[bytes | None] = []
    async for view, h, _ in log.scan(0, committed_only=True):
        out.extend(r.value for r in decode_records(view, h))
    return out


async def test_two_producers_commit_and_abort(env) -> None:  # type: ignore[no-untyped-def]
    log = await _log(env)
    await _ok(log, _plain())  # 0
    a = await _ok(log, _txn(1, 0, value=b"a"))  # 1-2, producer 1
    b = await _ok(log, _txn(2, 0, value=b"b"))  # 3-4, producer 2
    await _ok(log, _txn(1, 2, value=b"a"))  # 5-6
    assert (a, b) == (1, 3)
    assert log.last_stable_offset == 1 and log.high_watermark == 7
    # read_committed stops at the LSO; read_uncommitted sees everything
    committed = await log.read(0, 1 << 20, read_committed=True)
    assert [h.base_offset for h in split_batches(memoryview(committed.records))] == [0]
    assert committed.last_stable_offset == 1 and committed.high_watermark == 7
    everything = await log.read(0, 1 << 20)
    assert len(split_batches(memoryview(everything.records))) == 4
    assert (await log.read(1, 1 << 20, read_committed=True)).records == b""

    m1 = await _marker(log, 1, commit=True)  # 7
    assert m1 == 7
    assert log.last_stable_offset == 3  # producer 2 still open
    m2 = await _marker(log, 2, commit=False)  # 8
    assert log.last_stable_offset == log.high_watermark == 9
    assert log.aborted_transactions(0, 9) == [(2, 3)]
    assert log.aborted_transactions(0, 3) == []  # ends before producer 2 began
    assert log.aborted_transactions(m2 + 1, 9) == []  # starts after its marker
    records = (await log.read(0, 1 << 20, read_committed=True)).records
    headers = split_batches(memoryview(records))
    assert [h.base_offset for h in headers] == [0, 1, 3, 5, 7, 8]
    assert [h.is_control for h in headers] == [False] * 4 + [True, True]
    assert control_marker(records, headers[-1])[0] == CONTROL_ABORT
    # table topics: committed data only, no markers, nothing aborted
    assert await _committed_values(log) == [b"p", b"a0", b"a1", b"a0", b"a1"]


async def test_a_marker_for_a_producer_without_a_transaction_is_written_and_indexes_nothing(
    env,  # type: ignore[no-untyped-def]
) -> None:
    log = await _log(env)
    assert await _marker(log, 5, commit=False) == 0
    assert log.high_watermark == 1 and log.aborted_transactions(0, 1) == []


async def test_epochs_fence_batches_and_markers(env) -> None:  # type: ignore[no-untyped-def]
    log = await _log(env)
    await _ok(log, _txn(1, 0, epoch=3))
    # a lower epoch: a zombie's batch and a stale marker
    assert log.append(_txn(1, 2, epoch=2)).error == ErrorCode.invalid_producer_epoch
    assert log.write_marker(1, 2, True, 0).error == ErrorCode.invalid_producer_epoch
    # the coordinator bumps the epoch and aborts: the old epoch is fenced
    await _marker(log, 1, commit=False, epoch=4)
    assert log.append(_txn(1, 2, epoch=3)).error == ErrorCode.invalid_producer_epoch
    assert await _ok(log, _txn(1, 0, epoch=4)) == 3
    assert log.aborted_transactions(0, 10) == [(1, 0)]


async def test_a_stale_coordinator_epoch_is_fenced(env) -> None:  # type: ignore[no-untyped-def]
    log = await _log(env)
    await _ok(log, _txn(1, 0))
    assert log.write_marker(1, 0, True, 5).error == ErrorCode.none
    await _ok(log, _txn(1, 2))
    assert log.write_marker(1, 0, True, 4).error == ErrorCode.transaction_coordinator_fenced


async def test_a_non_transactional_batch_during_the_producers_transaction_is_refused(
    env,  # type: ignore[no-untyped-def]
) -> None:
    log = await _log(env)
    await _ok(log, _txn(1, 0))
    idempotent = build_batch(
        [(None, b"x", [], 1)], producer_id=1, producer_epoch=0, base_sequence=2
    )
    assert log.append(idempotent).error == ErrorCode.invalid_txn_state


async def test_a_reopened_partition_keeps_an_ongoing_transaction_and_indexes_its_abort(
    env,  # type: ignore[no-untyped-def]
) -> None:
    engine, store = env
    log = await _log(env)
    await _ok(log, _txn(1, 0))  # 0-1, aborted below
    await _marker(log, 1, commit=False)  # 2
    await log.txn_checkpoints.settled()  # the checkpoint the marker leaves
    assert store.get_txn_checkpoint(log.stream.stream_id) == TxnCheckpoint(
        3, (AbortedTxn(1, 0, 2),)
    )
    await _ok(log, _plain(3))  # 3-5
    await _ok(log, _txn(2, 0))  # 6-7, ongoing at the "crash"
    await _ok(log, _plain())  # 8

    fresh = _reopen(log, store)
    await fresh.rebuild_producer_state(window=2)  # the window alone would miss offset 6
    assert fresh.last_stable_offset == 6
    assert fresh.aborted_transactions(0, 9) == [(1, 0)]
    assert fresh.append(_txn(2, 0)).base_offset == 6  # a retried batch: its first offset back
    await _marker(fresh, 2, commit=False)
    assert fresh.aborted_transactions(0, 10) == [(1, 0), (2, 6)]
    assert fresh.last_stable_offset == fresh.high_watermark == 10


async def test_a_partition_without_a_checkpoint_is_scanned_once_and_then_checkpointed(
    env,  # type: ignore[no-untyped-def]
) -> None:
    engine, store = env
    log = await _log(env)
    log.txn_checkpoints.store = None  # a broker that kept no checkpoint (crashed before the first)
    await _ok(log, _txn(1, 0))  # 0-1
    await _ok(log, _plain())  # 2
    fresh = _reopen(log, store)
    assert await fresh.rebuild_producer_state() == 2
    assert fresh.last_stable_offset == 0
    await fresh.txn_checkpoints.settled()
    assert store.get_txn_checkpoint(log.stream.stream_id) == TxnCheckpoint(0, ())


async def test_moving_the_log_start_trims_the_aborted_index(env) -> None:  # type: ignore[no-untyped-def]
    engine, store = env
    log = await _log(env)
    await _ok(log, _txn(1, 0))  # 0-1
    await _marker(log, 1, commit=False)  # 2
    await _ok(log, _txn(2, 0))  # 3-4
    await _marker(log, 2, commit=False)  # 5
    await log.delete_records(3)
    assert log.aborted_transactions(0, 6) == [(2, 3)]
    await log.txn_checkpoints.settled()
    saved = store.get_txn_checkpoint(log.stream.stream_id)
    assert saved == TxnCheckpoint(6, (AbortedTxn(2, 3, 5),))
    fresh = _reopen(log, store)
    await fresh.rebuild_producer_state()
    assert fresh.aborted_transactions(0, 6) == [(2, 3)]


class _RefusingStream:
    """A stream whose engine cannot take an append (WAL full or storage gone)."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.stream_id, self.start_offset, self.next_offset, self.confirm_offset = 1, 0, 0, 0

    def append(self, payload: object, count: int) -> None:
        raise self.error


async def test_a_marker_the_storage_refuses_changes_nothing() -> None:
    from ingest.s3stream.errors import StreamBackpressureError

    cfg = TopicConfigRegistry.default().resolved({})
    log = PartitionLog("t", 0, _RefusingStream(StreamBackpressureError("WAL full")), lambda: cfg)  # type: ignore[arg-type]
    log.txn.on_transactional_batch(1, 0)  # as if its batch had been appended
    out = log.write_marker(1, 5, False, 0)
    assert out.error == ErrorCode.kafka_storage_error and out.throttled and out.durable is None
    # still open, not indexed, and the epoch was not raised: the coordinator retries
    assert log.txn.ongoing == {1: 0} and log.txn.aborted == []
    assert log.producers.epoch_of(1) is None
