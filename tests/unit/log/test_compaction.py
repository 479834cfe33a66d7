"""The log cleaner over the in-memory engine: latest record per key, offsets
kept, tombstones and delete.retention.ms, min/max compaction lag, the dirty
ratio, transactions, idempotent producer state, and the topic configs."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import crc32c
import pytest

from ingest.log.compaction import LogCleaner
from ingest.log.partition import PartitionLog
from ingest.log.topic_config import InvalidConfigError, TopicConfig, TopicConfigRegistry
from ingest.metadata import MemoryMetadataStore
from ingest.protocol.errors import ErrorCode, KafkaError
from ingest.protocol.records import build_batch, decode_records, split_batches
from ingest.s3stream import MemoryStreamEngine

NOW = 10_000_000


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


@pytest.fixture
async def engine() -> AsyncIterator[MemoryStreamEngine]:
    eng = MemoryStreamEngine()
    await eng.start()
    yield eng
    await eng.close()


def _config(**overrides: str) -> TopicConfig:
    values = {"cleanup.policy": "compact", **{k.replace("_", "."): v for k, v in overrides.items()}}
    registry = TopicConfigRegistry.default()
    return registry.resolved(registry.validate(values))


async def _log(
    engine: MemoryStreamEngine, store: MemoryMetadataStore, cfg: TopicConfig
) -> PartitionLog:
    return PartitionLog("t", 0, await engine.create_stream(), lambda: cfg, txn_store=store)


def _batch(
    records: list[tuple[bytes | None, bytes | None]],
    ts: int = NOW - 1000,
    pid: int = -1,
    seq: int = -1,
    transactional: bool = False,
) -> bytes:
    return build_batch(
        [(k, v, [], ts) for k, v in records],
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq,
        attributes=0x10 if transactional else 0,
    )


async def _ok(plog: PartitionLog, data: bytes) -> int:
    out = plog.append(data)
    assert out.error == ErrorCode.none, out
    assert out.durable is not None
    await out.durable
    return out.base_offset


async def _marker(plog: PartitionLog, pid: int, commit: bool) -> int:
    out = plog.write_marker(pid, 0, commit, 0)
    assert out.error == ErrorCode.none, out
    assert out.durable is not None
    await out.durable
    return out.base_offset


async def _records(
    plog: PartitionLog, start: int = 0, *, controls: bool = False
) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record from ``start`` as a consumer reads it (batch by batch,
    advancing past empty batches by their last offset)."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    pos = start
    while pos < plog.high_watermark:
        res = await plog.read(pos, 1 << 20)
        assert res.error == ErrorCode.none and res.records
        view = memoryview(bytearray(res.records))
        for h in split_batches(view, verify_crc=False):
            # every batch, rewritten or not, carries a valid CRC
            assert crc32c.crc32c(bytes(view[h.position + 21 : h.position + h.size])) == h.crc
            if h.is_control and not controls:
                pos = max(pos, h.last_offset + 1)
                continue
            for r in decode_records(view, h):
                if r.offset >= pos:
                    out.append((r.offset, r.key, r.value))
            pos = max(pos, h.last_offset + 1)
    return out


def _cleaner(
    plog: PartitionLog, cfg: TopicConfig, store: MemoryMetadataStore, clock: Clock, **kw: int
) -> LogCleaner:
    return LogCleaner(lambda: [(plog, cfg)], store, clock_ms=clock, **kw)


async def test_only_the_latest_record_of_each_key_stays_at_its_offset(
    engine: MemoryStreamEngine,
) -> None:
    store, clock, cfg = MemoryMetadataStore(), Clock(), _config()
    plog = await _log(engine, store, cfg)
    expected: dict[bytes, tuple[int, bytes]] = {}
    for i in range(0, 60, 3):
        base = await _ok(
            plog, _batch([(b"k%d" % ((i + j) % 5), b"v%d" % (i + j)) for j in range(3)])
        )
        for j in range(3):
            expected[b"k%d" % ((i + j) % 5)] = (base + j, b"v%d" % (i + j))
    before = await plog.retained_bytes()
    result = await _cleaner(plog, cfg, store, clock).run_once()
    assert len(result) == 1 and result[0].records_dropped == 55
    got = await _records(plog)
    assert sorted(got) == sorted((o, k, v) for k, (o, v) in expected.items())
    assert (plog.log_start_offset, plog.high_watermark) == (0, 60)
    assert await plog.retained_bytes() < before / 4
    # a fetch at a compacted-away offset returns the next records
    first_kept = min(o for o, _ in expected.values())
    assert (await _records(plog, 1))[0][0] == first_kept
    # and the partition goes on at the same offsets
    assert await _ok(plog, _batch([(b"k0", b"new")])) == 60


async def test_a_tombstone_stays_for_delete_retention_after_the_cleaner_saw_it(
    engine: MemoryStreamEngine,
) -> None:
    store, clock = MemoryMetadataStore(), Clock()
    cfg = _config(delete_retention_ms="1000")
    plog = await _log(engine, store, cfg)
    await _ok(plog, _batch([(b"a", b"1"), (b"b", b"1")]))
    await _ok(plog, _batch([(b"a", None)]))
    cleaner = _cleaner(plog, cfg, store, clock)
    await cleaner.run_once()
    assert await _records(plog) == [(1, b"b", b"1"), (2, b"a", None)]
    clock.now += 999
    assert await cleaner.run_once() == []  # nothing dirty, nothing expired yet
    assert (2, b"a", None) in await _records(plog)
    clock.now += 1
    passes = await cleaner.run_once()  # due: the tombstone expired
    assert passes and passes[0].tombstones_dropped == 1
    assert await _records(plog) == [(1, b"b", b"1")]
    assert plog.high_watermark == 3


async def test_tombstone_times_survive_a_new_cleaner(engine: MemoryStreamEngine) -> None:
    store, clock = MemoryMetadataStore(), Clock()
    cfg = _config(delete_retention_ms="1000")
    plog = await _log(engine, store, cfg)
    await _ok(plog, _batch([(b"a", b"1"), (b"a", None), (b"b", b"2")]))
    await _cleaner(plog, cfg, store, clock).run_once()
    clock.now += 500
    # a restarted broker: a new cleaner reads the state from the metadata store
    assert await _cleaner(plog, cfg, store, clock).run_once() == []
    clock.now += 500
    assert await _cleaner(plog, cfg, store, clock).run_once()
    assert await _records(plog) == [(2, b"b", b"2")]


async def test_records_younger_than_min_compaction_lag_are_not_cleaned(
    engine: MemoryStreamEngine,
) -> None:
    store, clock = MemoryMetadataStore(), Clock()
    cfg = _config(min_compaction_lag_ms="60000")
    plog = await _log(engine, store, cfg)
    await _ok(plog, _batch([(b"k", b"old1")], ts=NOW - 120_000))
    await _ok(plog, _batch([(b"k", b"old2")], ts=NOW - 120_000))
    await _ok(plog, _batch([(b"k", b"new1")], ts=NOW - 1_000))
    await _ok(plog, _batch([(b"k", b"new2")], ts=NOW - 1_000))
    await _cleaner(plog, cfg, store, clock).run_once(force=True)
    assert [v for _, _, v in await _records(plog)] == [b"old2", b"new1", b"new2"]


async def test_the_dirty_ratio_and_max_compaction_lag_decide_when_to_clean(
    engine: MemoryStreamEngine,
) -> None:
    store, clock = MemoryMetadataStore(), Clock()
    cfg = _config(min_cleanable_dirty_ratio="0.9")
    plog = await _log(engine, store, cfg)
    for i in range(20):
        await _ok(plog, _batch([(b"k%d" % i, b"x" * 100)]))
    cleaner = _cleaner(plog, cfg, store, clock)
    assert await cleaner.run_once()  # all dirty
    await _ok(plog, _batch([(b"k0", b"y" * 100)], ts=clock.now - 10_000))
    assert await cleaner.run_once() == []  # 1/21 dirty < 0.9
    lagged = _config(min_cleanable_dirty_ratio="0.9", max_compaction_lag_ms="5000")
    assert await _cleaner(plog, lagged, store, clock).run_once()
    assert [v for _, k, v in await _records(plog) if k == b"k0"] == [b"y" * 100]


async def test_aborted_records_go_and_markers_go_once_their_transaction_is_gone(
    engine: MemoryStreamEngine,
) -> None:
    store, clock = MemoryMetadataStore(), Clock()
    cfg = _config(delete_retention_ms="1000")
    plog = await _log(engine, store, cfg)
    await _ok(
        plog, _batch([(b"a", b"aborted"), (b"b", b"aborted")], pid=7, seq=0, transactional=True)
    )
    await _ok(plog, _batch([(b"c", b"committed")], pid=8, seq=0, transactional=True))
    abort_at = await _marker(plog, 7, commit=False)
    commit_at = await _marker(plog, 8, commit=True)
    await _ok(plog, _batch([(b"d", b"plain")]))
    cleaner = _cleaner(plog, cfg, store, clock)
    await cleaner.run_once(force=True)
    got = await _records(plog, controls=True)
    assert [(k, v) for _, k, v in got if k in (b"a", b"b", b"c", b"d")] == [
        (b"c", b"committed"),
        (b"d", b"plain"),
    ]
    offsets = [o for o, _, _ in got]
    assert abort_at in offsets and commit_at in offsets  # markers kept for now
    clock.now += 1000
    await cleaner.run_once()
    offsets = [o for o, _, _ in await _records(plog, controls=True)]
    assert abort_at not in offsets  # nothing of the aborted transaction is left
    assert commit_at in offsets  # its transaction still has data
    assert [k for _, k, _ in await _records(plog)] == [b"c", b"d"]


async def test_an_idempotent_producer_keeps_its_sequence_state(engine: MemoryStreamEngine) -> None:
    store, clock, cfg = MemoryMetadataStore(), Clock(), _config()
    plog = await _log(engine, store, cfg)
    await _ok(plog, _batch([(b"k", b"p5-0")], pid=5, seq=0))
    last = await _ok(plog, _batch([(b"k", b"p5-1")], pid=5, seq=1))
    await _ok(plog, _batch([(b"k", b"p6-0")], pid=6, seq=0))  # supersedes p5's records
    await _cleaner(plog, cfg, store, clock).run_once(force=True)
    assert [v for _, _, v in await _records(plog)] == [b"p6-0"]
    # a restarted broker rebuilds producer state from the log: p5's last
    # batch is still there (empty), so its retry is a duplicate and its next
    # sequence is in order
    again = PartitionLog("t", 0, plog.stream, lambda: cfg, txn_store=store)
    await again.rebuild_producer_state()
    dup = again.append(_batch([(b"k", b"p5-1")], pid=5, seq=1))
    assert dup.error == ErrorCode.none and dup.base_offset == last
    nxt = again.append(_batch([(b"k", b"p5-2")], pid=5, seq=2))
    assert nxt.error == ErrorCode.none and nxt.base_offset == 3
    gap = again.append(_batch([(b"k", b"p5-9")], pid=5, seq=9))
    assert gap.error == ErrorCode.out_of_order_sequence_number


async def test_a_small_key_map_cleans_in_several_passes(engine: MemoryStreamEngine) -> None:
    store, clock, cfg = MemoryMetadataStore(), Clock(), _config()
    plog = await _log(engine, store, cfg)
    for i in range(40):
        await _ok(plog, _batch([(b"key-%02d" % (i % 10), b"v%d" % i)]))
    cleaner = _cleaner(plog, cfg, store, clock, max_map_bytes=300)
    first = await cleaner.run_once(force=True)
    assert first and first[0].clean_end < 40
    for _ in range(20):
        if not await cleaner.run_once(force=True):
            break
    assert sorted(v for _, _, v in await _records(plog)) == sorted(
        b"v%d" % i for i in range(30, 40)
    )


async def test_a_compacted_topic_refuses_records_without_a_key(engine: MemoryStreamEngine) -> None:
    store, cfg = MemoryMetadataStore(), _config()
    plog = await _log(engine, store, cfg)
    out = plog.append(_batch([(b"k", b"v"), (None, b"no key")]))
    assert out.error == ErrorCode.invalid_record
    assert out.message == "Compacted topic cannot accept message without key"
    assert plog.high_watermark == 0


async def test_compact_alone_ignores_retention_and_compact_delete_applies_it(
    engine: MemoryStreamEngine,
) -> None:
    store = MemoryMetadataStore()
    for policy, trimmed in (("compact", False), ("compact,delete", True), ("delete,compact", True)):
        cfg = _config(cleanup_policy=policy, retention_ms="1")
        plog = await _log(engine, store, cfg)
        await _ok(plog, _batch([(b"k", b"v")], ts=1))
        await plog.enforce_retention()
        assert (plog.log_start_offset == 1) is trimmed, policy


@pytest.mark.parametrize(
    ("configs", "ok"),
    [
        ({"cleanup.policy": "compact"}, True),
        ({"cleanup.policy": "compact,delete"}, True),
        ({"cleanup.policy": "delete, compact"}, True),
        ({"cleanup.policy": "compacted"}, False),
        ({"delete.retention.ms": "-1"}, False),
        ({"min.compaction.lag.ms": "-1"}, False),
        ({"max.compaction.lag.ms": "0"}, False),
        ({"min.cleanable.dirty.ratio": "0.01"}, True),
        ({"min.cleanable.dirty.ratio": "1.5"}, False),
        ({"min.cleanable.dirty.ratio": "x"}, False),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, False),
        ({"segment.ms": "0"}, False),
    ],
)
def test_compaction_configs_are_validated_as_kafka_does(configs: dict[str, str], ok: bool) -> None:
    registry = TopicConfigRegistry.default()
    if ok:
        registry.validate(configs)
    else:
        with pytest.raises(InvalidConfigError):
            registry.validate(configs)


def test_compaction_config_defaults_are_kafkas() -> None:
    cfg = TopicConfigRegistry.default().resolved({})
    assert cfg.get("delete.retention.ms") == "86400000"
    assert cfg.get("min.compaction.lag.ms") == "0"
    assert cfg.get("max.compaction.lag.ms") == str((1 << 63) - 1)
    assert cfg.get("min.cleanable.dirty.ratio") == "0.5"
    assert not cfg.compact and cfg.delete


async def test_the_cleaner_keeps_to_its_io_rate(engine: MemoryStreamEngine) -> None:
    store, clock, cfg = MemoryMetadataStore(), Clock(), _config()
    plog = await _log(engine, store, cfg)
    for i in range(40):
        await _ok(plog, _batch([(b"k%d" % (i % 4), b"v" * 1000)]))
    rate = 100_000  # bytes/s: the pass reads ~42 KB and writes ~4 KB
    cleaner = _cleaner(plog, cfg, store, clock, max_bytes_per_second=rate)
    started = time.monotonic()
    assert await cleaner.run_once(force=True)
    assert time.monotonic() - started >= 0.3


def _compressed(records: list[tuple[bytes | None, bytes | None]], codec: int) -> bytes:
    """A batch like a client's with ``codec`` (1 gzip, 2 raw snappy as librdkafka
    writes it, 3 lz4, 4 zstd)."""
    import gzip
    import struct

    import cramjam
    import lz4.frame
    import zstandard

    plain = bytearray(_batch(records))
    body = bytes(plain[61:])
    packed = {
        1: lambda b: gzip.compress(b),
        2: lambda b: bytes(cramjam.snappy.compress_raw(b)),
        3: lambda b: lz4.frame.compress(b),
        4: lambda b: zstandard.ZstdCompressor().compress(b),
    }[codec](body)
    out = bytearray(plain[:61]) + packed
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, codec)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
async def test_cleaned_batches_keep_their_codec(engine: MemoryStreamEngine, codec: int) -> None:
    store, clock, cfg = MemoryMetadataStore(), Clock(), _config()
    plog = await _log(engine, store, cfg)
    await _ok(
        plog, _compressed([(b"a", b"1" * 500), (b"b", b"1" * 500), (b"a", b"2" * 500)], codec)
    )
    await _cleaner(plog, cfg, store, clock).run_once(force=True)
    assert await _records(plog) == [(1, b"b", b"1" * 500), (2, b"a", b"2" * 500)]
    res = await plog.read(0, 1 << 20)
    assert res.records is not None
    (h,) = split_batches(memoryview(bytearray(res.records)))
    assert (h.compression, h.records_count, h.last_offset_delta) == (codec, 2, 2)
    assert h.size < 500


async def test_delete_records_is_refused_without_the_delete_policy(
    engine: MemoryStreamEngine,
) -> None:
    store = MemoryMetadataStore()
    plog = await _log(engine, store, _config())
    await _ok(plog, _batch([(b"k", b"v")]))
    with pytest.raises(KafkaError) as info:
        await plog.delete_records(1)
    assert info.value.error_code == ErrorCode.policy_violation
    both = await _log(engine, store, _config(cleanup_policy="compact,delete"))
    await _ok(both, _batch([(b"k", b"v")]))
    assert await both.delete_records(1) == 1


async def test_a_compressed_batch_with_a_keyless_record_is_refused(
    engine: MemoryStreamEngine,
) -> None:
    plog = await _log(engine, MemoryMetadataStore(), _config())
    out = plog.submit(_compressed([(b"k", b"v"), (b"k2", b"v"), (None, b"no key")], 3))
    result = out if not hasattr(out, "__await__") else await out  # type: ignore[misc]
    assert result.error == ErrorCode.invalid_record
    assert plog.high_watermark == 0
    ok = plog.submit(_compressed([(b"k", b"v")], 3))
    result = ok if not hasattr(ok, "__await__") else await ok  # type: ignore[misc]
    assert result.error == ErrorCode.none
