"""A partition moving to another broker (LogManager.open_partition) keeps its
transactions: the new leader's log has the same LSO and aborted index."""

from __future__ import annotations

from ingest.log.manager import LogManager
from ingest.log.topic_config import TopicConfigRegistry
from ingest.metadata import MemoryMetadataStore
from ingest.metadata.api import TxnCheckpoint
from ingest.protocol.errors import ErrorCode
from ingest.protocol.records import build_batch
from ingest.s3stream import MemoryStreamEngine


def _txn(pid: int, seq: int) -> bytes:
    return build_batch(
        [(None, b"v", [], 1000), (None, b"w", [], 1001)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        attributes=0x10,
    )


async def test_the_next_leader_rebuilds_the_lso_and_the_aborted_index() -> None:
    store, engine = MemoryMetadataStore(), MemoryStreamEngine()
    await engine.start()
    try:
        first = LogManager(store, engine, TopicConfigRegistry.default(), lazy=True)
        await first.load()
        await first.create_topic("t", 1, 1, {})
        log = await first.open_partition("t", 0, 1)
        for data in (_txn(1, 0), _txn(2, 0)):  # 0-1 and 2-3
            out = log.append(data)
            assert out.error == ErrorCode.none and out.durable is not None
            await out.durable
        marker = log.write_marker(1, 0, False, 0)  # 4: producer 1 aborts
        assert marker.durable is not None
        await marker.durable
        # more than the producer-state window a reopen scans: only the checkpoint
        # in the metadata store tells the next leader where the transactions are
        filler = log.append(build_batch([(None, b"f", [], 1000)] * 10_001))
        assert filler.error == ErrorCode.none and filler.durable is not None
        await filler.durable
        assert (log.last_stable_offset, log.aborted_transactions(0, 5)) == (2, [(1, 0)])
        await first.close_partition("t", 0)

        second = LogManager(store, engine, TopicConfigRegistry.default(), lazy=True)
        await second.load()
        moved = await second.open_partition("t", 0, 2)
        assert moved is not log
        assert moved.last_stable_offset == 2  # producer 2's transaction is still open
        assert moved.aborted_transactions(0, 5) == [(1, 0)]
        end = moved.write_marker(2, 0, False, 0)
        assert end.error == ErrorCode.none and end.durable is not None
        await end.durable
        assert moved.aborted_transactions(0, 6) == [(1, 0), (2, 2)]
        assert moved.last_stable_offset == moved.high_watermark == 10_007
    finally:
        await engine.close()


async def test_the_retention_pass_moves_a_quiet_partitions_checkpoint_forward() -> None:
    """Without markers, the checkpoint still follows the log (in steps), so a
    reopen does not replay everything appended since the last transaction.
    A partition that never had a transaction writes none."""
    store, engine = MemoryMetadataStore(), MemoryStreamEngine()
    await engine.start()
    try:
        logs = LogManager(store, engine, TopicConfigRegistry.default())
        await logs.load()
        await logs.create_topic("t", 1, 1, {})
        log = logs.partition("t", 0)
        assert log is not None
        sid = log.stream.stream_id
        for step in (log.append(_txn(1, 0)), log.write_marker(1, 0, True, 0)):  # 0-1, 2
            assert step.durable is not None
            await step.durable
        for n in (6_000, 100):
            out = log.append(build_batch([(None, b"f", [], 1000)] * n))
            assert out.durable is not None
            await out.durable
            await logs.enforce_retention()
            assert store.get_txn_checkpoint(sid) == TxnCheckpoint(6_003, ())  # not per 100
    finally:
        await engine.close()


async def test_a_partition_that_never_had_a_transaction_writes_no_checkpoint() -> None:
    store, engine = MemoryMetadataStore(), MemoryStreamEngine()
    await engine.start()
    try:
        logs = LogManager(store, engine, TopicConfigRegistry.default())
        await logs.load()
        await logs.create_topic("t", 1, 1, {})
        log = logs.partition("t", 0)
        assert log is not None
        out = log.append(build_batch([(None, b"f", [], 1000)] * 6_000))
        assert out.durable is not None
        await out.durable
        await logs.enforce_retention()
        reopened = LogManager(store, engine, TopicConfigRegistry.default())
        await reopened.load()
        await logs.enforce_retention()
        assert store.get_txn_checkpoint(log.stream.stream_id) is None
    finally:
        await engine.close()
