"""Stream objects at upload, stream object compaction, read-ahead, physical removal."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ingest.metadata import MemoryMetadataStore, ObjectRecord
from ingest.s3stream import S3StreamConfig, open_engine
from ingest.s3stream.objects import read_index
from ingest.s3stream.objectstore import MemoryObjectStore

T = TypeVar("T")

KIB = 1024


def _config(tmp_path: Path, **kw: object) -> S3StreamConfig:
    base: dict[str, object] = {
        "wal_dir": tmp_path / "wal",
        "upload_size_bytes": 256 * KIB,
        "upload_interval_ms": 60_000,
        "log_cache_bytes": 1 << 20,
        "block_cache_bytes": 1 << 20,
        "stream_object_bytes": 64 * KIB,
        "compaction_small_bytes": 128 * KIB,
        "compaction_target_bytes": 1 << 20,
        "stream_object_target_bytes": 1 << 20,
    }
    base.update(kw)
    return S3StreamConfig.model_validate(base)


async def test_a_busy_stream_gets_its_own_object_and_quiet_ones_share(tmp_path: Path) -> None:
    store = MemoryObjectStore()
    metadata = MemoryMetadataStore()
    engine = open_engine(_config(tmp_path), metadata, store)
    await engine.start()
    busy = await engine.create_stream()
    quiet = [await engine.create_stream() for _ in range(3)]
    for i in range(20):
        await busy.append(os.urandom(8 * KIB), 1)
        if i % 5 == 0:
            for q in quiet:
                await q.append(os.urandom(100), 1)
    await engine.flush()
    objs = metadata.list_objects()
    kinds = sorted(o.kind for o in objs)
    assert kinds == ["stream", "stream_set"]
    assert engine.objects_put == 2 and engine.object_put_seconds > 0  # the metrics' counters
    so = next(o for o in objs if o.kind == "stream")
    assert so.key.endswith(".so") and [r.stream_id for r in so.ranges] == [busy.stream_id]
    sso = next(o for o in objs if o.kind == "stream_set")
    assert sorted(r.stream_id for r in sso.ranges) == [q.stream_id for q in quiet]
    index = await read_index(store, so.key, so.size)  # self-describing, like the metadata
    assert [(e.stream_id, e.start_offset, e.end_offset) for e in index] == [(busy.stream_id, 0, 20)]
    await engine.close()


async def test_consecutive_stream_objects_merge_and_reads_return_the_same_bytes(
    tmp_path: Path,
) -> None:
    store = MemoryObjectStore()
    metadata = MemoryMetadataStore()
    engine = open_engine(_config(tmp_path, block_cache_bytes=0), metadata, store)
    await engine.start()
    s = await engine.create_stream()
    payloads = []
    for _ in range(12):  # twelve uploads -> twelve stream objects
        for _ in range(10):
            payloads.append(os.urandom(10 * KIB))
            await s.append(payloads[-1], 1)
        await engine.flush()
    assert len(metadata.list_objects()) == 12
    while await engine.compact():
        pass
    objs = metadata.list_objects()
    assert len(objs) == 2  # ~1.2 MiB in objects of up to 1 MiB
    assert all(o.kind == "stream" for o in objs)
    assert sorted(k for k in store.objects) == sorted(o.key for o in objs)
    engine.log_cache._capacity = 0  # every read goes to objects
    engine.log_cache.evict()
    got: list[bytes] = []
    while len(got) < len(payloads):
        got.extend(bytes(b.payload) for b in await s.fetch(len(got), len(payloads), 1 << 20))
    assert got == payloads
    await engine.close()


async def test_small_stream_set_objects_merge_and_split_big_streams_out(tmp_path: Path) -> None:
    store = MemoryObjectStore()
    metadata = MemoryMetadataStore()
    config = _config(tmp_path, stream_object_bytes=40 * KIB)
    engine = open_engine(config, metadata, store)
    await engine.start()
    a, b = await engine.create_stream(), await engine.create_stream()
    for _ in range(8):  # eight small stream set objects holding both streams
        for _ in range(3):
            await a.append(os.urandom(10 * KIB), 1)
            await b.append(os.urandom(100), 1)
        await engine.flush()
    assert len(metadata.list_objects()) == 8
    while await engine.compact():
        pass
    objs = metadata.list_objects()
    assert sorted(o.kind for o in objs) == ["stream", "stream_set"]
    assert {r.stream_id for o in objs if o.kind == "stream" for r in o.ranges} == {a.stream_id}
    await engine.close()


async def test_trimmed_stream_objects_are_removed_from_the_store(tmp_path: Path) -> None:
    store = MemoryObjectStore()
    metadata = MemoryMetadataStore()
    engine = open_engine(_config(tmp_path), metadata, store)
    await engine.start()
    s = await engine.create_stream()
    for _ in range(4):
        for _ in range(10):
            await s.append(os.urandom(10 * KIB), 1)
        await engine.flush()
    assert len(store.objects) == 4
    await s.trim(30)
    assert await engine.collect_garbage() == 3
    assert len(store.objects) == 1 and len(metadata.list_objects()) == 1
    await engine.close()


async def test_catch_up_reads_prefetch_the_following_objects(tmp_path: Path) -> None:
    store = MemoryObjectStore()
    metadata = MemoryMetadataStore()
    engine = open_engine(_config(tmp_path, read_ahead_ranges=2), metadata, store)
    await engine.start()
    s = await engine.create_stream()
    for _ in range(6):
        for _ in range(10):
            await s.append(os.urandom(10 * KIB), 1)
        await engine.flush()
    engine.log_cache._capacity = 0  # every read goes to objects
    engine.log_cache.evict()
    await s.fetch(0, 60, 1)
    for t in list(engine._reader.prefetches):
        await t
    assert engine.block_cache.misses == 3  # the object read and two read ahead
    hits = engine.block_cache.hits
    await s.fetch(10, 60, 1)
    await s.fetch(20, 60, 1)
    assert engine.block_cache.hits == hits + 2
    await engine.close()


class _CountingMetadata(MemoryMetadataStore):
    """Counts the object lookups a read makes."""

    def __init__(self) -> None:
        super().__init__()
        self.lookups = 0

    def objects_for_stream(
        self, stream_id: int, start_offset: int, end_offset: int, limit: int | None = None
    ) -> list[ObjectRecord]:
        self.lookups += 1
        return super().objects_for_stream(stream_id, start_offset, end_offset, limit)


async def test_a_reader_in_the_last_objects_does_not_look_them_up_per_fetch(
    tmp_path: Path,
) -> None:
    store = MemoryObjectStore()
    metadata = _CountingMetadata()
    engine = open_engine(_config(tmp_path, read_ahead_ranges=2), metadata, store)
    await engine.start()
    s = await engine.create_stream()
    payloads: list[bytes] = []

    async def upload(n: int) -> None:
        for _ in range(n):
            for _ in range(10):
                payloads.append(os.urandom(10 * KIB))
                await s.append(payloads[-1], 1)
            await engine.flush()

    await upload(6)
    engine.log_cache._capacity = 0  # every read goes to objects
    engine.log_cache.evict()
    got: list[bytes] = []
    while len(got) < 60:  # one batch per fetch, as a slow consumer reads
        got += [bytes(b.payload) for b in await s.fetch(len(got), 60, 1)]
    assert got == payloads
    # a window of 1 + 2 * 2 objects from offset 0, then one from the fourth
    # object that found the last three: none for each of the 30 fetches after
    assert metadata.lookups == 2
    # objects uploaded after the lookup that found "no more" are still read
    await upload(2)
    engine.log_cache.evict()
    while len(got) < 80:
        got += [bytes(b.payload) for b in await s.fetch(len(got), 80, 1 << 20)]
    assert got == payloads
    await engine.close()


class _RecordingStore(MemoryObjectStore):
    """Records the (key, start, end) of every read through ``get_then``."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[str, int | None, int | None]] = []

    async def get_then(
        self,
        key: str,
        start: int | None,
        end: int | None,
        then: Callable[[bytes | memoryview], T],
    ) -> T:
        self.reads.append((key, start, end))
        return await super().get_then(key, start, end, then)


async def test_a_range_that_is_most_of_its_object_is_read_with_a_plain_get(
    tmp_path: Path,
) -> None:
    store = _RecordingStore()
    metadata = MemoryMetadataStore()
    engine = open_engine(_config(tmp_path, read_ahead_ranges=0), metadata, store)
    await engine.start()
    busy = await engine.create_stream()
    quiet = [await engine.create_stream() for _ in range(2)]
    payloads = [os.urandom(8 * KIB) for _ in range(20)]
    for p in payloads:
        await busy.append(p, 1)
    small = [os.urandom(3 * KIB) for _ in range(4)]
    for q in quiet:
        for p in small:
            await q.append(p, 1)
    await engine.flush()
    await engine.close()

    engine = open_engine(_config(tmp_path, read_ahead_ranges=0), metadata, store)
    await engine.start()
    so = next(o for o in metadata.list_objects() if o.kind == "stream")
    sso = next(o for o in metadata.list_objects() if o.kind == "stream_set")
    b = await engine.open_stream(busy.stream_id)
    got = [bytes(x.payload) for x in await b.fetch(0, 20, 1 << 20)]
    assert got == payloads
    assert store.reads == [(so.key, None, None)]  # a stream object: read whole
    q = await engine.open_stream(quiet[0].stream_id)
    assert [bytes(x.payload) for x in await q.fetch(0, 4, 1 << 20)] == small
    r = next(r for r in sso.ranges if r.stream_id == quiet[0].stream_id)
    assert store.reads[1] == (sso.key, r.position, r.position + r.length)  # a third of it
    # the cache counts what a range keeps alive: the whole object for the first
    assert engine.block_cache.size == so.size + r.length
    await engine.close()
    assert engine.block_cache.size == 0  # close lets the cached ranges go


async def test_the_uploader_removes_trimmed_objects_without_a_full_listing(
    tmp_path: Path,
) -> None:
    store = MemoryObjectStore()
    metadata = MemoryMetadataStore()
    engine = open_engine(_config(tmp_path, gc_interval_ms=10**9), metadata, store)
    await engine.start()
    s = await engine.create_stream()
    other = await engine.create_stream()
    for _ in range(3):
        for _ in range(10):
            await s.append(os.urandom(10 * KIB), 1)
        await other.append(b"x", 1)
        await engine.flush()
    listed = 0
    real = metadata.list_objects

    def counting() -> list:  # type: ignore[type-arg]
        nonlocal listed
        listed += 1
        return real()

    metadata.list_objects = counting  # type: ignore[method-assign]
    before = len(store.objects)
    await s.trim(20)
    for _ in range(50):
        if len(store.objects) == before - 2:
            break
        await asyncio.sleep(0.1)
        engine._wakeup.set()
    assert len(store.objects) == before - 2  # the two stream objects below 20
    assert listed == 0
    await engine.close()
