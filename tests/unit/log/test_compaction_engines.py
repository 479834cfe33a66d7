"""The log cleaner over both stream engines: the in-memory one and
S3StreamEngine (file WAL, directory object store), including a restart of
the real engine after cleaning."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ingest.log.compaction import LogCleaner
from ingest.log.partition import PartitionLog
from ingest.metadata import SqliteMetadataStore
from ingest.s3stream import MemoryStreamEngine, S3StreamConfig, StreamEngine, open_engine
from ingest.s3stream.engine import S3StreamEngine
from ingest.s3stream.objectstore import FileObjectStore
from tests.unit.log.test_compaction import Clock, _batch, _config, _marker, _ok, _records


def _s3_engine(
    tmp_path: Path, metadata: SqliteMetadataStore, objects: FileObjectStore
) -> S3StreamEngine:
    config = S3StreamConfig(
        wal_dir=tmp_path / "wal",
        upload_size_bytes=4096,
        upload_interval_ms=50,
        log_cache_bytes=1 << 20,
    )
    return open_engine(config, metadata, objects)


@pytest.fixture(params=["memory", "s3stream-file"])
async def setup(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[StreamEngine, SqliteMetadataStore]]:
    metadata = SqliteMetadataStore(tmp_path / "meta.db")
    if request.param == "memory":
        mem = MemoryStreamEngine()
        await mem.start()
        yield mem, metadata
        await mem.close()
        metadata.close()
        return
    objects = FileObjectStore(tmp_path / "objects")
    engine = _s3_engine(tmp_path, metadata, objects)
    await engine.start()
    yield engine, metadata
    await engine.close()
    await objects.close()
    metadata.close()


async def _uploaded(engine: StreamEngine) -> None:
    if isinstance(engine, S3StreamEngine):
        await engine.flush()


async def test_latest_per_key_tombstones_and_transactions_on_both_engines(
    setup: tuple[StreamEngine, SqliteMetadataStore],
) -> None:
    engine, store = setup
    clock = Clock()
    cfg = _config(delete_retention_ms="1000")
    plog = PartitionLog("t", 0, await engine.create_stream(), lambda: cfg, txn_store=store)
    for i in range(30):
        await _ok(plog, _batch([(b"k%d" % (i % 3), b"v%d" % i + b"." * 300)]))
    await _ok(plog, _batch([(b"gone", b"x"), (b"gone", None)]))
    await _ok(plog, _batch([(b"t", b"aborted")], pid=9, seq=0, transactional=True))
    await _marker(plog, 9, commit=False)
    await _uploaded(engine)
    cleaner = LogCleaner(lambda: [(plog, cfg)], store, clock_ms=clock)
    assert await cleaner.run_once()
    got = await _records(plog)
    assert [(k, v[:3]) for _, k, v in got if v is not None] == [
        (b"k0", b"v27"),
        (b"k1", b"v28"),
        (b"k2", b"v29"),
    ]
    assert [k for _, k, v in got if v is None] == [b"gone"]
    clock.now += 1000
    assert await cleaner.run_once()
    assert [k for _, k, _ in await _records(plog)] == [b"k0", b"k1", b"k2"]
    assert plog.high_watermark == 34
    # what is appended after a pass reads back whole
    await _ok(plog, _batch([(b"k0", b"new")]))
    assert (await _records(plog))[-1] == (34, b"k0", b"new")
    # the partition's batch index follows the rewrites: what a fresh scan finds
    fresh = PartitionLog("t", 0, plog.stream, lambda: cfg, txn_store=store)
    assert await plog.batch_index() == await fresh.batch_index()
    assert await plog.retained_bytes() == await fresh.retained_bytes()


async def test_a_cleaned_partition_reads_the_same_after_an_engine_restart(tmp_path: Path) -> None:
    metadata = SqliteMetadataStore(tmp_path / "meta.db")
    objects = FileObjectStore(tmp_path / "objects")
    engine = _s3_engine(tmp_path, metadata, objects)
    await engine.start()
    cfg = _config()
    stream = await engine.create_stream()
    plog = PartitionLog("t", 0, stream, lambda: cfg, txn_store=metadata)
    for i in range(40):
        await _ok(plog, _batch([(b"k%d" % (i % 4), b"v%d" % i)], pid=3, seq=i))
    await engine.flush()
    await LogCleaner(lambda: [(plog, cfg)], metadata, clock_ms=Clock()).run_once(force=True)
    before = await _records(plog)
    assert [v for _, _, v in before] == [b"v36", b"v37", b"v38", b"v39"]
    await engine.close()
    engine = _s3_engine(tmp_path, metadata, objects)
    await engine.start()
    try:
        again = PartitionLog(
            "t", 0, await engine.open_stream(stream.stream_id), lambda: cfg, txn_store=metadata
        )
        await again.rebuild_producer_state()
        assert await _records(again) == before
        # the producer's retry is a duplicate, its next sequence is in order
        dup = again.append(_batch([(b"k3", b"v39")], pid=3, seq=39))
        assert dup.base_offset == 39, dup
        out = again.append(_batch([(b"k0", b"v40")], pid=3, seq=40))
        assert out.base_offset == 40, out
    finally:
        await engine.close()
        await objects.close()
        metadata.close()
