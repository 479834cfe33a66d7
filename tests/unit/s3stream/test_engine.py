"""S3StreamEngine specifics: uploads, object reads, recovery, ordering, trim and GC."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ingest.errors import CorruptDataError, StorageError
from ingest.metadata import MemoryMetadataStore, MetadataStore, SqliteMetadataStore
from ingest.s3stream import (
    S3StreamConfig,
    S3StreamEngine,
    StreamBackpressureError,
    StreamFencedError,
    open_engine,
)
from ingest.s3stream.objects import read_index
from ingest.s3stream.objectstore import FileObjectStore, MemoryObjectStore
from ingest.s3stream.wal import WalAppend, WalRecord
from ingest.s3stream.wal.api import OnDone, call_when_done

MIB = 1 << 20


def _config(tmp_path: Path, **kw: object) -> S3StreamConfig:
    base: dict[str, object] = {
        "wal_dir": tmp_path / "wal",
        "wal_segment_bytes": MIB,
        "upload_size_bytes": 8 * MIB,
        "upload_interval_ms": 60_000,
        "log_cache_bytes": MIB,
        "block_cache_bytes": 4 * MIB,
    }
    base.update(kw)
    return S3StreamConfig.model_validate(base)


async def _read_all(stream: object, start: int = 0) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    pos = start
    s = stream
    while pos < s.confirm_offset:  # type: ignore[attr-defined]
        batches = await s.fetch(pos, s.confirm_offset, 256 * 1024)  # type: ignore[attr-defined]
        assert batches, f"no data at {pos}"
        out.extend((b.base_offset, bytes(b.payload)) for b in batches)
        pos = batches[-1].end_offset
    return out


async def _crash(engine: S3StreamEngine) -> None:
    """Stop the engine as a kill would: no final upload, no WAL trim."""
    engine._closed = True
    if engine._uploader is not None:
        engine._uploader.cancel()
        try:
            await engine._uploader
        except asyncio.CancelledError:
            pass
    await engine._wal.close()


@pytest.fixture
def metadata(tmp_path: Path) -> MetadataStore:
    return SqliteMetadataStore(tmp_path / "meta.db")


@pytest.fixture
def objects(tmp_path: Path) -> FileObjectStore:
    return FileObjectStore(tmp_path / "objects")


async def test_reads_come_from_objects_after_the_log_cache_evicts(
    tmp_path: Path, metadata: MetadataStore, objects: FileObjectStore
) -> None:
    engine = open_engine(_config(tmp_path, upload_size_bytes=256 * 1024), metadata, objects)
    await engine.start()
    s = await engine.create_stream()
    payloads = [os.urandom(100_000) for _ in range(40)]  # 4 MB > 1 MiB log cache
    for p in payloads:
        await s.append(p, 3)
    await engine.flush()
    assert engine.uploads >= 1
    assert engine.log_cache.size <= MIB
    assert await _read_all(s) == [(3 * i, p) for i, p in enumerate(payloads)]
    assert engine.block_cache.misses > 0
    assert (await s.fetch(31, 40, 1))[0].base_offset == 30
    await engine.close()


async def test_upload_commits_one_object_for_all_streams_and_trims_the_wal(
    tmp_path: Path, metadata: MetadataStore, objects: FileObjectStore
) -> None:
    engine = open_engine(_config(tmp_path, log_cache_bytes=64 * MIB), metadata, objects)
    await engine.start()
    a, b = await engine.create_stream(), await engine.create_stream()
    for _ in range(10):
        await asyncio.gather(a.append(os.urandom(200_000), 1), b.append(os.urandom(200_000), 1))
    wal_dir = tmp_path / "wal"
    assert len(list(wal_dir.glob("*.wal"))) > 2
    await engine.flush()
    objs = metadata.list_objects()
    assert len(objs) == 1 and {r.stream_id for r in objs[0].ranges} == {a.stream_id, b.stream_id}
    rec = metadata.get_stream(a.stream_id)
    assert rec is not None and rec.end_offset == 10
    assert len(list(wal_dir.glob("*.wal"))) == 1
    assert [o.key for o in await objects.list()] == [objs[0].key]
    index = await read_index(objects, objs[0].key, objs[0].size)  # self-describing objects
    assert [(e.stream_id, e.start_offset, e.end_offset, e.position, e.length) for e in index] == [
        (r.stream_id, r.start_offset, r.end_offset, r.position, r.length) for r in objs[0].ranges
    ]
    await engine.close()


async def test_size_threshold_triggers_background_upload(
    tmp_path: Path, metadata: MetadataStore, objects: FileObjectStore
) -> None:
    engine = open_engine(_config(tmp_path, upload_size_bytes=MIB), metadata, objects)
    await engine.start()
    s = await engine.create_stream()
    for _ in range(12):
        await s.append(os.urandom(100_000), 1)
    for _ in range(100):
        if engine.uploads:
            break
        await asyncio.sleep(0.02)
    assert engine.uploads >= 1
    await engine.close()


async def test_interval_triggers_background_upload(
    tmp_path: Path, metadata: MetadataStore, objects: FileObjectStore
) -> None:
    engine = open_engine(_config(tmp_path, upload_interval_ms=50), metadata, objects)
    await engine.start()
    s = await engine.create_stream()
    await s.append(b"small", 1)
    for _ in range(100):
        if engine.uploads:
            break
        await asyncio.sleep(0.02)
    assert engine.uploads == 1
    await engine.close()


async def test_recovery_replays_acknowledged_appends_from_the_wal(
    tmp_path: Path, metadata: MetadataStore, objects: FileObjectStore
) -> None:
    engine = open_engine(_config(tmp_path, log_cache_bytes=64 * MIB), metadata, objects)
    await engine.start()
    a, b = await engine.create_stream(), await engine.create_stream()
    expected_a = [(i * 2, os.urandom(1000 + i)) for i in range(30)]
    for _, p in expected_a[:10]:
        await a.append(p, 2)
    await engine.flush()  # the first ten are in an object, the WAL tail still has them
    for _, p in expected_a[10:]:
        await a.append(p, 2)
    await b.append(b"bee", 5)
    await _crash(engine)

    engine2 = open_engine(_config(tmp_path), metadata, objects)
    await engine2.start()
    a2 = await engine2.open_stream(a.stream_id)
    b2 = await engine2.open_stream(b.stream_id)
    assert (a2.next_offset, a2.confirm_offset, b2.confirm_offset) == (60, 60, 5)
    assert await _read_all(a2) == expected_a
    assert await _read_all(b2) == [(0, b"bee")]
    rec = metadata.get_stream(a.stream_id)
    assert rec is not None and rec.end_offset == 60  # replayed data was uploaded at start
    assert await a2.append(b"next", 1) == 60
    await engine2.close()


async def test_close_uploads_everything_so_objects_alone_suffice(
    tmp_path: Path, metadata: MetadataStore, objects: FileObjectStore
) -> None:
    engine = open_engine(_config(tmp_path), metadata, objects)
    await engine.start()
    s = await engine.create_stream()
    for i in range(20):
        await s.append(bytes([i]) * 5000, 1)
    await engine.close()
    for p in (tmp_path / "wal").glob("*.wal"):
        p.unlink()
    engine2 = open_engine(_config(tmp_path), metadata, objects)
    await engine2.start()
    s2 = await engine2.open_stream(s.stream_id)
    assert await _read_all(s2) == [(i, bytes([i]) * 5000) for i in range(20)]
    await engine2.close()


async def test_trim_then_gc_deletes_objects_below_start(
    tmp_path: Path, metadata: MetadataStore, objects: FileObjectStore
) -> None:
    engine = open_engine(_config(tmp_path), metadata, objects)
    await engine.start()
    s = await engine.create_stream()
    for _ in range(3):
        await s.append(b"x" * 100, 10)
        await engine.flush()
    assert len(metadata.list_objects()) == 3
    await s.trim(15)
    assert await engine.collect_garbage() == 1
    assert len(metadata.list_objects()) == 2
    assert len(await objects.list()) == 2
    assert [b.base_offset for b in await s.fetch(15, 30, 1000)] == [10, 20]
    rec = metadata.get_stream(s.stream_id)
    assert rec is not None and rec.start_offset == 15
    await engine.close()


async def test_deleted_stream_objects_are_collected(
    tmp_path: Path, metadata: MetadataStore, objects: FileObjectStore
) -> None:
    engine = open_engine(_config(tmp_path), metadata, objects)
    await engine.start()
    s = await engine.create_stream()
    keep = await engine.create_stream()
    await s.append(b"gone", 1)
    await engine.flush()
    await keep.append(b"kept", 1)
    await engine.flush()
    await engine.delete_stream(s.stream_id)
    assert await engine.collect_garbage() == 1
    assert len(await objects.list()) == 1
    assert await _read_all(keep) == [(0, b"kept")]
    await engine.close()


class _ManualWal:
    """A WAL whose appends become durable only when the test says so."""

    def __init__(self) -> None:
        self.appends: list[WalAppend] = []
        self.position = 0

    async def recover(self) -> AsyncIterator[WalRecord]:
        return
        yield  # pragma: no cover

    async def start(self) -> None:
        pass

    @property
    def next_position(self) -> int:
        return self.position

    def append(
        self,
        stream_id: int,
        base_offset: int,
        count: int,
        payload: bytes | memoryview,
        on_done: OnDone | None = None,
    ) -> WalAppend:
        start = self.position
        self.position += len(payload) + 1
        w = WalAppend(start, self.position, asyncio.get_running_loop().create_future())
        if on_done is not None:
            call_when_done(w.done, on_done)
        self.appends.append(w)
        return w

    async def trim(self, upto_position: int) -> None:
        pass

    async def close(self) -> None:
        for w in self.appends:
            if not w.done.done():
                w.done.set_result(None)


async def _manual_engine(tmp_path: Path) -> tuple[S3StreamEngine, _ManualWal]:
    wal = _ManualWal()
    engine = S3StreamEngine(_config(tmp_path), MemoryMetadataStore(), MemoryObjectStore(), wal)
    await engine.start()
    return engine, wal


async def test_confirm_offset_advances_only_over_the_contiguous_durable_prefix(
    tmp_path: Path,
) -> None:
    engine, wal = await _manual_engine(tmp_path)
    s = await engine.create_stream()
    f1, f2, f3 = s.append(b"a", 1), s.append(b"b", 1), s.append(b"c", 1)
    wal.appends[1].done.set_result(None)
    await asyncio.sleep(0)
    assert s.confirm_offset == 0 and not f2.done()  # type: ignore[attr-defined]
    assert await s.fetch(0, 3, 100) == []
    wal.appends[0].done.set_result(None)
    assert await asyncio.gather(f1, f2) == [0, 1]
    assert s.confirm_offset == 2
    wal.appends[2].done.set_result(None)
    assert await f3 == 2
    assert s.confirm_offset == 3
    await engine.close()


async def test_a_wal_failure_fails_later_appends_and_fences_the_engine(tmp_path: Path) -> None:
    engine, wal = await _manual_engine(tmp_path)
    s = await engine.create_stream()
    ok = s.append(b"ok", 1)
    bad = s.append(b"bad", 1)
    later = s.append(b"later", 1)
    wal.appends[0].done.set_result(None)
    wal.appends[2].done.set_result(None)
    wal.appends[1].done.set_exception(StorageError("disk on fire"))
    assert await ok == 0
    with pytest.raises(StorageError):
        await bad
    with pytest.raises(StorageError):
        await later
    assert s.confirm_offset == 1
    with pytest.raises(StreamFencedError):
        s.append(b"more", 1)
    await engine.close()


async def test_start_deletes_orphan_objects_left_by_a_crash(
    tmp_path: Path, metadata: MetadataStore, objects: FileObjectStore
) -> None:
    engine = open_engine(_config(tmp_path), metadata, objects)
    await engine.start()
    s = await engine.create_stream()
    await s.append(b"kept", 1)
    await engine.flush()
    await engine.close()
    await objects.put("streams/00000000000000000999.sso", b"put but never committed")
    await objects.put("other/file", b"not ours")
    engine = open_engine(_config(tmp_path), metadata, objects)
    await engine.start()
    keys = [o.key for o in await objects.list()]
    assert "streams/00000000000000000999.sso" not in keys
    assert "other/file" in keys and len(keys) == 2
    s = await engine.open_stream(s.stream_id)
    assert bytes((await s.fetch(0, 1, 100))[0].payload) == b"kept"
    await engine.close()


class _FailingObjectStore(MemoryObjectStore):
    def __init__(self) -> None:
        super().__init__()
        self.down = True

    async def put(
        self, key: str, data: bytes | bytearray | memoryview, *, if_absent: bool = False
    ) -> None:
        if self.down:
            raise StorageError("object storage unavailable")
        await super().put(key, data, if_absent=if_absent)


async def test_appends_are_refused_while_too_much_waits_for_upload(tmp_path: Path) -> None:
    store = _FailingObjectStore()
    config = _config(tmp_path, upload_size_bytes=MIB, max_pending_upload_bytes=2 * MIB)
    engine = open_engine(config, MemoryMetadataStore(), store)
    await engine.start()
    s = await engine.create_stream()
    with pytest.raises(StreamBackpressureError):
        for _ in range(30):
            await s.append(os.urandom(100_000), 1)
    assert s.next_offset == s.confirm_offset  # the refused append took no offset
    store.down = False
    for _ in range(300):
        if engine.log_cache.unuploaded_bytes < MIB:
            break
        await asyncio.sleep(0.02)
    assert await s.append(b"again", 1) == s.next_offset - 1
    await engine.close()


async def _fresh_read(
    tmp_path: Path, metadata: MetadataStore, objects: FileObjectStore, sid: int
) -> list[tuple[int, bytes]]:
    engine = open_engine(_config(tmp_path), metadata, objects)
    await engine.start()
    s = await engine.open_stream(sid)
    out = await _read_all(s, s.start_offset)
    await engine.close()
    return out


async def test_compaction_merges_small_objects_without_changing_reads(
    tmp_path: Path, metadata: MetadataStore, objects: FileObjectStore
) -> None:
    engine = open_engine(_config(tmp_path), metadata, objects)
    await engine.start()
    a, b = await engine.create_stream(), await engine.create_stream()
    for i in range(6):
        await a.append(bytes([i]) * 3000, 2)
        if i % 2:
            await b.append(bytes([100 + i]) * 2000, 1)
        await engine.flush()
    before = {o.key for o in metadata.list_objects()}
    assert len(before) == 6
    assert await engine.compact() == 6
    after = metadata.list_objects()
    assert len(after) == 1 and after[0].key not in before
    assert [o.key for o in await objects.list()] == [after[0].key]
    assert await engine.compact() == 0  # a lone small object waits for company
    await engine.close()
    assert await _fresh_read(tmp_path, metadata, objects, a.stream_id) == [
        (2 * i, bytes([i]) * 3000) for i in range(6)
    ]
    assert await _fresh_read(tmp_path, metadata, objects, b.stream_id) == [
        (i, bytes([101 + 2 * i]) * 2000) for i in range(3)
    ]


async def test_compaction_refuses_a_range_read_short_instead_of_dropping_its_tail(
    tmp_path: Path, metadata: MetadataStore, objects: FileObjectStore
) -> None:
    engine = open_engine(_config(tmp_path), metadata, objects)
    await engine.start()
    s = await engine.create_stream()
    for i in range(4):
        await s.append(bytes([i]) * 3000, 1)
        await s.append(bytes([i]) * 3000, 1)
        await engine.flush()
    first = metadata.list_objects()[0]
    r = first.ranges[0]
    body = await objects.get(first.key)
    # the object ends one whole batch early: its range reads short, at a
    # batch boundary, so only the length tells that its last batch is gone
    await objects.put(first.key, body[: r.position + r.length - (20 + 3000)])
    with pytest.raises(CorruptDataError, match="3000|read as"):
        await engine.compact()
    assert {o.key for o in metadata.list_objects()} >= {first.key}  # nothing replaced
    await engine.close()


async def test_compaction_drops_trimmed_batches(
    tmp_path: Path, metadata: MetadataStore, objects: FileObjectStore
) -> None:
    config = _config(tmp_path, compaction_small_bytes=0)  # only dead data triggers it
    engine = open_engine(config, metadata, objects)
    await engine.start()
    a, b = await engine.create_stream(), await engine.create_stream()
    for i in range(10):
        await a.append(bytes([i]) * 10_000, 1)
    await b.append(b"b" * 1000, 1)
    await engine.flush()
    assert await engine.compact() == 0  # nothing dead yet
    [old] = metadata.list_objects()
    await a.trim(8)
    assert await engine.compact() == 1
    [new] = metadata.list_objects()
    assert new.size < old.size / 3
    await engine.close()
    assert await _fresh_read(tmp_path, metadata, objects, a.stream_id) == [
        (8, bytes([8]) * 10_000),
        (9, bytes([9]) * 10_000),
    ]
    assert await _fresh_read(tmp_path, metadata, objects, b.stream_id) == [(0, b"b" * 1000)]


class _FlakyObjectStore(MemoryObjectStore):
    """The first get of each key fails as if compaction had just replaced it."""

    def __init__(self) -> None:
        super().__init__()
        self.failed: set[str] = set()

    async def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        if key not in self.failed:
            self.failed.add(key)
            from ingest.s3stream.errors import ObjectNotFoundError

            raise ObjectNotFoundError(key)
        return await super().get(key, start, end)


async def test_a_read_retries_through_the_metadata_when_an_object_vanishes(
    tmp_path: Path,
) -> None:
    store = _FlakyObjectStore()
    metadata = MemoryMetadataStore()
    engine = open_engine(_config(tmp_path), metadata, store)
    await engine.start()
    s = await engine.create_stream()
    await s.append(b"data", 1)
    await engine.close()
    engine = open_engine(_config(tmp_path), metadata, store)
    await engine.start()
    s = await engine.open_stream(s.stream_id)
    assert [bytes(b.payload) for b in await s.fetch(0, 1, 100)] == [b"data"]
    await engine.close()


class _ScriptedObjectStore(MemoryObjectStore):
    """Puts take scripted delays (seconds) or fail (None), in call order."""

    def __init__(self, script: list[float | None], by_key: dict[str, float] | None = None) -> None:
        super().__init__()
        self.script = script
        self.by_key = by_key or {}  # delays of given keys, whatever the call order
        self.put_order: list[str] = []

    async def put(
        self, key: str, data: bytes | bytearray | memoryview, *, if_absent: bool = False
    ) -> None:
        step = self.script.pop(0) if self.script else 0.0
        step = self.by_key.get(key, step)
        if step is None:
            raise StorageError("scripted put failure")
        await asyncio.sleep(step)
        self.put_order.append(key)
        await super().put(key, data, if_absent=if_absent)


async def _fill(engine: S3StreamEngine, n: int) -> tuple[Any, list[bytes]]:
    """Append ``n`` batches with the background uploader stopped (flush drives uploads)."""
    assert engine._uploader is not None
    engine._uploader.cancel()
    try:
        await engine._uploader
    except asyncio.CancelledError:
        pass
    engine._uploader = None
    s = await engine.create_stream()
    payloads = [os.urandom(60_000) for _ in range(n)]
    for p in payloads:
        await s.append(p, 1)
    return s, payloads


async def test_uploads_run_in_parallel_but_commit_in_order(tmp_path: Path) -> None:
    store = _ScriptedObjectStore([], by_key={f"streams/{1:020d}.sso": 0.2})
    metadata = MemoryMetadataStore()
    config = _config(tmp_path, upload_size_bytes=100_000, upload_parallelism=4)
    engine = open_engine(config, metadata, store)
    await engine.start()
    s, payloads = await _fill(engine, 8)
    await engine.flush()
    assert store.put_order[0] != f"streams/{1:020d}.sso"  # the first put finished last
    objs = metadata.list_objects()
    assert [r.start_offset for o in objs for r in o.ranges] == sorted(
        r.start_offset for o in objs for r in o.ranges
    )
    rec = metadata.get_stream(s.stream_id)
    assert rec is not None and rec.end_offset == 8
    await engine.close()
    engine = open_engine(config, metadata, store)
    await engine.start()
    s2 = await engine.open_stream(s.stream_id)
    assert [p for _, p in await _read_all(s2)] == payloads
    await engine.close()


async def test_a_failed_put_abandons_later_uploads_and_retries_in_order(tmp_path: Path) -> None:
    store = _ScriptedObjectStore([0.0, None, 0.05, 0.05])
    metadata = MemoryMetadataStore()
    config = _config(tmp_path, upload_size_bytes=100_000, upload_parallelism=4)
    engine = open_engine(config, metadata, store)
    await engine.start()
    s, payloads = await _fill(engine, 8)
    # the second put fails: the uploads started after it are abandoned, and flush
    # retries (the script is used up: puts succeed then) until everything is up
    await asyncio.wait_for(engine.flush(), 10)
    assert store.script == []
    assert engine.log_cache.unuploaded_bytes == 0
    committed = {o.key for o in metadata.list_objects()}
    assert set(store.objects) == committed  # abandoned objects were deleted
    ranges = sorted(
        (r.start_offset, r.end_offset) for o in metadata.list_objects() for r in o.ranges
    )
    assert ranges[0][0] == 0 and ranges[-1][1] == 8
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))  # no gap, no overlap
    await engine.close()
    engine = open_engine(config, metadata, store)
    await engine.start()
    s2 = await engine.open_stream(s.stream_id)
    assert [p for _, p in await _read_all(s2)] == payloads
    await engine.close()
