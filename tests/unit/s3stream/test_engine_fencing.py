"""A superseded S3Stream engine is fenced through the metadata store.

Engine A keeps running while engine B starts on the same object store,
metadata store and object prefix (a broker replaced while still alive). Each
engine has its own file WAL, so no WAL fencing exists: B's writer claim in
the metadata store alone must stop A from committing, trimming or deleting.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.metadata import MemoryMetadataStore, MetadataStore, SqliteMetadataStore
from ingest.s3stream import S3StreamConfig, S3StreamEngine, StreamFencedError, open_engine
from ingest.s3stream.objectstore import MemoryObjectStore
from tests.unit.s3stream.test_engine import _ManualWal

MIB = 1 << 20


def _config(wal_dir: Path, **kw: object) -> S3StreamConfig:
    base: dict[str, object] = {
        "wal_dir": wal_dir,
        "wal_segment_bytes": MIB,
        "upload_size_bytes": 8 * MIB,
        "upload_interval_ms": 60_000,
        "compaction_interval_ms": 10**9,
        "log_cache_bytes": MIB,
    }
    base.update(kw)
    return S3StreamConfig.model_validate(base)


@pytest.fixture(params=["memory", "sqlite"])
def metadata(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MetadataStore]:
    m: MetadataStore
    m = (
        MemoryMetadataStore()
        if request.param == "memory"
        else SqliteMetadataStore(tmp_path / "m.db")
    )
    yield m
    m.close()


def _snapshot(metadata: MetadataStore) -> tuple[object, ...]:
    return (metadata.list_streams(), metadata.list_objects())


async def _read(engine: S3StreamEngine, sid: int) -> list[bytes]:
    s = await engine.open_stream(sid)
    return [bytes(b.payload) for b in await s.fetch(0, s.confirm_offset, 1 << 30)]


async def test_a_superseded_engine_commits_trims_and_compacts_nothing_more(
    tmp_path: Path, metadata: MetadataStore
) -> None:
    objects = MemoryObjectStore()
    a = open_engine(_config(tmp_path / "wal-a"), metadata, objects)
    await a.start()
    sa = await a.create_stream()
    sid = sa.stream_id
    first = [os.urandom(1000) for _ in range(10)]
    for p in first:
        await sa.append(p, 1)
    await a.flush()

    b = open_engine(_config(tmp_path / "wal-b"), metadata, objects)
    await b.start()  # claims the object prefix
    sb = await b.open_stream(sid)
    assert sb.confirm_offset == 10
    second = [os.urandom(1000) for _ in range(3)]
    for p in second:
        await sb.append(p, 1)
    await b.flush()
    before = _snapshot(metadata)
    rec = metadata.get_stream(sid)
    assert rec is not None and rec.end_offset == 13
    assert len(metadata.list_objects()) == 2

    # A has not learned yet: its append lands in its own WAL, its upload is refused
    await sa.append(b"from the zombie", 1)
    with pytest.raises(StreamFencedError):
        await asyncio.wait_for(a.flush(), 5)  # refused at once, no retry loop
    assert _snapshot(metadata) == before
    with pytest.raises(StreamFencedError):
        await sa.append(b"after it learned", 1)
    with pytest.raises(StreamFencedError):
        await sa.trim(5)
    with pytest.raises(StreamFencedError):  # would merge (and delete) B's object
        await a.compact()
    assert _snapshot(metadata) == before
    t = time.monotonic()
    await asyncio.wait_for(a.close(), 5)
    assert time.monotonic() - t < 5
    assert _snapshot(metadata) == before
    # every object the metadata names is there; A left no objects behind
    assert sorted(o.key for o in await objects.list("streams/")) == sorted(
        o.key for o in metadata.list_objects()
    )
    assert await _read(b, sid) == first + second
    await b.close()


async def test_a_superseded_engine_neither_deletes_nor_creates_streams(
    tmp_path: Path, metadata: MetadataStore
) -> None:
    """A DeleteTopics reaching the replaced broker must not delete a stream
    its successor serves (the zombie has not learned yet: no upload failed)."""
    objects = MemoryObjectStore()
    a = open_engine(_config(tmp_path / "wal-a"), metadata, objects)
    await a.start()
    sa = await a.create_stream()
    await sa.append(b"kept", 1)
    await a.flush()
    b = open_engine(_config(tmp_path / "wal-b"), metadata, objects)
    await b.start()
    before = _snapshot(metadata)
    with pytest.raises(StreamFencedError):
        await a.delete_stream(sa.stream_id)
    assert _snapshot(metadata) == before
    with pytest.raises(StreamFencedError):  # fenced for good now
        await a.create_stream()
    assert _snapshot(metadata) == before
    await a.close()
    assert await _read(b, sa.stream_id) == [b"kept"]
    # the successor deletes and creates as before
    await b.delete_stream(sa.stream_id)
    assert (await b.create_stream()).stream_id != sa.stream_id
    await b.close()


async def test_a_superseded_engine_learns_from_its_background_upload(
    tmp_path: Path, metadata: MetadataStore
) -> None:
    objects = MemoryObjectStore()
    a = open_engine(_config(tmp_path / "wal-a", upload_interval_ms=20), metadata, objects)
    await a.start()
    sa = await a.create_stream()
    await sa.append(b"a0", 1)
    await a.flush()
    b = open_engine(_config(tmp_path / "wal-b"), metadata, objects)
    await b.start()
    before = _snapshot(metadata)
    deadline = time.monotonic() + 5
    with pytest.raises(StreamFencedError):
        while time.monotonic() < deadline:  # acknowledged locally until it learns
            await sa.append(b"zombie", 1)
            await asyncio.sleep(0.01)
    assert a._uploader is not None
    await asyncio.wait_for(asyncio.shield(a._uploader), 5)  # the uploader stopped
    assert _snapshot(metadata) == before
    await asyncio.wait_for(a.close(), 5)
    assert _snapshot(metadata) == before
    await b.close()


async def test_appends_in_flight_when_the_engine_learns_are_not_acknowledged(
    tmp_path: Path,
) -> None:
    metadata = MemoryMetadataStore()
    objects = MemoryObjectStore()
    wal = _ManualWal()
    a = S3StreamEngine(_config(tmp_path / "wal-a"), metadata, objects, wal)
    await a.start()
    sa = await a.create_stream()
    first = sa.append(b"before", 1)
    wal.appends[0].done.set_result(None)
    assert await first == 0
    b = open_engine(_config(tmp_path / "wal-b"), metadata, objects)
    await b.start()
    pending = sa.append(b"in flight", 1)
    with pytest.raises(StreamFencedError):
        await a.flush()
    wal.appends[1].done.set_result(None)  # durable in A's WAL, which B never reads
    with pytest.raises(StreamFencedError):
        await pending
    assert sa.confirm_offset == 1
    await asyncio.wait_for(a.close(), 5)
    await b.close()


async def test_each_start_claims_a_new_epoch_and_a_restart_still_writes(
    tmp_path: Path, metadata: MetadataStore
) -> None:
    objects = MemoryObjectStore()
    a = open_engine(_config(tmp_path / "wal"), metadata, objects)
    await a.start()
    s = await a.create_stream()
    await s.append(b"one", 1)
    await a.close()
    b = open_engine(_config(tmp_path / "wal"), metadata, objects)
    await b.start()
    assert a._writer is not None and b._writer is not None
    assert b._writer == (a._writer[0], a._writer[1] + 1)
    s = await b.open_stream(s.stream_id)
    await s.append(b"two", 1)
    await b.flush()
    await s.trim(1)
    assert await b.collect_garbage() == 1
    rec = metadata.get_stream(s.stream_id)
    assert rec is not None and (rec.start_offset, rec.end_offset) == (1, 2)
    await b.close()
