"""The partition log over a stream: stamping, idempotence, reads, offsets by time, retention."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ingest.log.partition import EARLIEST, LATEST, MAX_TIMESTAMP, PartitionLog
from ingest.log.topic_config import TopicConfigRegistry
from ingest.protocol.errors import ErrorCode
from ingest.protocol.records import build_batch, decode_records, split_batches
from ingest.s3stream import MemoryStreamEngine


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
async def make_log() -> AsyncIterator:  # type: ignore[type-arg]
    engine = MemoryStreamEngine()
    await engine.start()
    registry = TopicConfigRegistry.default()

    async def make(
        overrides: dict[str, str] | None = None, clock: Clock | None = None
    ) -> PartitionLog:
        cfg = registry.resolved(registry.validate(overrides or {}))
        stream = await engine.create_stream()
        return PartitionLog("t", 0, stream, lambda: cfg, clock_ms=clock or Clock())

    yield make
    await engine.close()


def _batch(n: int, ts: int = 1000, pid: int = -1, seq: int = -1, epoch: int = 0) -> bytes:
    return build_batch(
        [(b"k%d" % i, b"v%d" % i, [], ts + i) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch if pid >= 0 else -1,
        base_sequence=seq,
    )


async def _all_records(log: PartitionLog, start: int = 0) -> list:  # type: ignore[type-arg]
    out = []
    async for view, h, _ in log.scan(start):
        out.extend(decode_records(view, h))
    return out


async def test_appends_get_consecutive_offsets_and_reads_return_them(make_log) -> None:  # type: ignore[no-untyped-def]
    log = await make_log()
    a = log.append(_batch(3))
    b = log.append(_batch(2))
    assert (a.base_offset, b.base_offset) == (0, 3)
    await a.durable
    await b.durable
    assert log.high_watermark == 5
    res = await log.read(0, 1 << 20)
    assert res.error == ErrorCode.none
    headers = split_batches(memoryview(res.records))
    assert [h.base_offset for h in headers] == [0, 3]
    assert [r.offset for r in await _all_records(log)] == [0, 1, 2, 3, 4]


async def test_reading_past_the_high_watermark_is_out_of_range(make_log) -> None:  # type: ignore[no-untyped-def]
    log = await make_log()
    await log.append(_batch(2)).durable
    assert (await log.read(2, 100)).records == b""
    assert (await log.read(3, 100)).error == ErrorCode.offset_out_of_range


async def test_batches_over_max_message_bytes_are_rejected(make_log) -> None:  # type: ignore[no-untyped-def]
    log = await make_log({"max.message.bytes": "100"})
    out = log.append(build_batch([(b"k", b"x" * 200, [], 1)]))
    assert out.error == ErrorCode.message_too_large
    assert log.log_end_offset == 0


async def test_a_corrupt_batch_is_rejected_and_nothing_is_appended(make_log) -> None:  # type: ignore[no-untyped-def]
    log = await make_log()
    data = bytearray(_batch(2))
    data[-1] ^= 1
    assert log.append(bytes(data)).error == ErrorCode.corrupt_message
    assert log.log_end_offset == 0


async def test_duplicate_idempotent_batch_returns_its_original_offset(make_log) -> None:  # type: ignore[no-untyped-def]
    log = await make_log()
    first = log.append(_batch(3, pid=7, seq=0))
    await first.durable
    second = log.append(_batch(2, pid=7, seq=3))
    await second.durable
    dup = log.append(_batch(3, pid=7, seq=0))
    assert dup.error == ErrorCode.none and dup.base_offset == 0
    assert log.log_end_offset == 5


async def test_sequence_gap_is_out_of_order(make_log) -> None:  # type: ignore[no-untyped-def]
    log = await make_log()
    await log.append(_batch(3, pid=7, seq=0)).durable
    gap = log.append(_batch(1, pid=7, seq=5))
    assert gap.error == ErrorCode.out_of_order_sequence_number
    assert log.log_end_offset == 3


async def test_stale_producer_epoch_is_fenced(make_log) -> None:  # type: ignore[no-untyped-def]
    log = await make_log()
    await log.append(_batch(1, pid=7, seq=0, epoch=2)).durable
    assert log.append(_batch(1, pid=7, seq=1, epoch=1)).error == ErrorCode.invalid_producer_epoch


async def test_offsets_by_time_follow_kafka_semantics(make_log) -> None:  # type: ignore[no-untyped-def]
    log = await make_log()
    await log.append(build_batch([(None, b"a", [], 100), (None, b"b", [], 300)])).durable
    await log.append(build_batch([(None, b"c", [], 200), (None, b"d", [], 500)])).durable
    assert await log.offset_for(EARLIEST) == (0, -1)
    assert await log.offset_for(LATEST) == (4, -1)
    assert await log.offset_for(150) == (1, 300)  # earliest offset whose timestamp >= 150
    assert await log.offset_for(400) == (3, 500)
    assert await log.offset_for(600) == (-1, -1)
    assert await log.offset_for(MAX_TIMESTAMP) == (3, 500)


async def test_log_append_time_topics_stamp_the_broker_time(make_log) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    log = await make_log({"message.timestamp.type": "LogAppendTime"}, clock)
    out = log.append(_batch(2, ts=5))
    await out.durable
    assert out.log_append_time == clock.now
    assert {r.timestamp for r in await _all_records(log)} == {clock.now}


async def test_delete_records_moves_the_log_start(make_log) -> None:  # type: ignore[no-untyped-def]
    log = await make_log()
    await log.append(_batch(5)).durable
    assert await log.delete_records(3) == 3
    assert (await log.read(1, 100)).error == ErrorCode.offset_out_of_range
    assert await log.offset_for(EARLIEST) == (3, -1)


async def test_retention_ms_trims_old_batches(make_log) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    log = await make_log({"retention.ms": "1000"}, clock)
    await log.append(_batch(2, ts=clock.now - 5000)).durable
    await log.append(_batch(2, ts=clock.now - 10)).durable
    assert await log.enforce_retention() == 2
    assert [r.offset for r in await _all_records(log, 0)] == [2, 3]


async def test_retention_reads_only_what_this_process_did_not_append(make_log) -> None:  # type: ignore[no-untyped-def]
    """The first retention pass indexes the log: batches appended by this
    process are indexed as they are appended, so only older ones (a restart's)
    are read back, not a chunk of the stream per partition on the loop."""
    clock = Clock()
    log = await make_log({"retention.ms": "1000"}, clock)
    fetches: list[int] = []
    fetch = log.stream.fetch

    async def counted(start: int, end: int, max_bytes: int):  # type: ignore[no-untyped-def]
        fetches.append(start)
        return await fetch(start, end, max_bytes)

    log.stream.fetch = counted
    await log.append(_batch(2, ts=clock.now - 5000)).durable
    await log.append(_batch(2, ts=clock.now - 10)).durable
    assert await log.enforce_retention() == 2
    assert fetches == []
    # restarted over the same stream: the old batches are read to index them
    fresh = PartitionLog("t", 0, log.stream, log._config, clock_ms=clock)
    await fresh.append(_batch(1, ts=clock.now - 5000)).durable
    clock.now += 10_000
    assert await fresh.enforce_retention() == 5
    assert fetches == [2]
    assert [r.offset for r in await _all_records(fresh, 0)] == []


async def test_retention_bytes_keeps_the_newest_data_within_the_limit(make_log) -> None:  # type: ignore[no-untyped-def]
    log = await make_log({"retention.bytes": "150", "retention.ms": "-1"})
    for _ in range(4):
        await log.append(build_batch([(None, b"x" * 50, [], 1)])).durable
    start = await log.enforce_retention()
    assert start == 3  # each batch is ~ 80 bytes: only the newest fits


async def test_producer_state_is_rebuilt_from_the_log_after_a_restart(make_log) -> None:  # type: ignore[no-untyped-def]
    log = await make_log()
    await log.append(_batch(3, pid=9, seq=0)).durable
    await log.append(_batch(2, pid=9, seq=3)).durable
    # A new PartitionLog over the same stream: what a restarted broker builds.
    fresh = PartitionLog("t", 0, log.stream, log._config)
    assert await fresh.rebuild_producer_state() == 2
    dup = fresh.append(_batch(2, pid=9, seq=3))
    assert dup.error == ErrorCode.none and dup.base_offset == 3
    assert fresh.log_end_offset == 5
    assert fresh.append(_batch(1, pid=9, seq=9)).error == ErrorCode.out_of_order_sequence_number


class _RefusingStream:
    """A stream whose engine is out of WAL space."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.stream_id, self.start_offset, self.next_offset, self.confirm_offset = 1, 0, 0, 0

    def append(self, payload: object, count: int) -> None:
        raise self.error


@pytest.mark.parametrize("throttled", [True, False])
async def test_storage_refusal_is_a_retriable_storage_error_and_takes_no_offset(
    throttled: bool,
) -> None:
    from ingest.errors import StorageError
    from ingest.s3stream.errors import StreamBackpressureError

    registry = TopicConfigRegistry.default()
    cfg = registry.resolved({})
    err = StreamBackpressureError("WAL full") if throttled else StorageError("disk gone")
    log = PartitionLog("t", 0, _RefusingStream(err), lambda: cfg)  # type: ignore[arg-type]
    out = log.append(_batch(2, pid=3, seq=0))
    assert out.error == ErrorCode.kafka_storage_error and out.error.retriable
    assert out.throttled is throttled
    assert out.durable is None
    # the refused batch did not enter the producer state: a retry is not a "duplicate"
    assert log.producers.check(3, 0, 0, 1).duplicate_of is None


async def test_topic_names_differing_only_by_dot_and_underscore_collide() -> None:
    from ingest.log.manager import LogManager
    from ingest.metadata import MemoryMetadataStore
    from ingest.protocol.errors import KafkaError

    engine = MemoryStreamEngine()
    await engine.start()
    logs = LogManager(MemoryMetadataStore(), engine, TopicConfigRegistry.default())
    await logs.create_topic("a.b", 1, 1, {})
    with pytest.raises(KafkaError) as exc:
        await logs.create_topic("a_b", 1, 1, {})
    assert exc.value.error_code == ErrorCode.invalid_topic_exception
    assert "collides" in str(exc.value)
    await engine.close()
