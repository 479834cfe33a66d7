"""``Stream.rewrite`` (log compaction's engine operation): one contract over the
memory engine and S3StreamEngine (file WAL + directory object store), and
crash cases of the real engine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ingest.metadata import SqliteMetadataStore
from ingest.metadata.errors import StreamNotOwnedError
from ingest.s3stream import MemoryStreamEngine, S3StreamConfig, StreamEngine, open_engine
from ingest.s3stream.api import Stream, StreamBatch
from ingest.s3stream.engine import S3StreamEngine
from ingest.s3stream.objectstore import FileObjectStore


def _config(tmp_path: Path) -> S3StreamConfig:
    return S3StreamConfig(
        wal_dir=tmp_path / "wal",
        upload_size_bytes=1,  # nearly every append becomes its own object
        upload_interval_ms=10,
        log_cache_bytes=1 << 20,
    )


@pytest.fixture(params=["memory", "s3stream-file"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StreamEngine]:
    if request.param == "memory":
        mem = MemoryStreamEngine()
        await mem.start()
        yield mem
        await mem.close()
        return
    metadata = SqliteMetadataStore(tmp_path / "meta.db")
    objects = FileObjectStore(tmp_path / "objects")
    eng = open_engine(_config(tmp_path), metadata, objects)
    await eng.start()
    yield eng
    await eng.close()
    await objects.close()
    metadata.close()


async def _committed(engine: StreamEngine, s: Stream) -> None:
    """Wait until everything appended is in object storage (the real engine)."""
    if isinstance(engine, S3StreamEngine):
        await engine.flush()
    assert s.committed_end == s.next_offset


def _keep_even(run: list[StreamBatch]) -> list[StreamBatch]:
    """Drop odd-numbered batches: each dropped batch's offsets join the next
    kept one, the last batch always stays (so the run's span is kept)."""
    out: list[StreamBatch] = []
    gap_start: int | None = None
    for i, b in enumerate(run):
        last = i == len(run) - 1
        if int(bytes(b.payload)[1:]) % 2 and not last:
            if gap_start is None:
                gap_start = b.base_offset
            continue
        base = gap_start if gap_start is not None else b.base_offset
        out.append(StreamBatch(b.stream_id, base, b.end_offset - base, b"k" + bytes(b.payload)))
        gap_start = None
    return out


async def _all(s: Stream, start: int = 0) -> list[tuple[int, int, bytes]]:
    out: list[tuple[int, int, bytes]] = []
    pos = start
    while pos < s.confirm_offset:
        got = await s.fetch(pos, s.confirm_offset, 100)
        out.extend((b.base_offset, b.count, bytes(b.payload)) for b in got)
        pos = got[-1].end_offset
    return out


class TestRewriteContract:
    async def test_rewrite_replaces_batches_and_keeps_offsets(self, engine: StreamEngine) -> None:
        s = await engine.create_stream()
        for i in range(10):
            await s.append(b"b%d" % i, 3)
        await _committed(engine, s)
        stats = await s.rewrite(0, 30, _keep_even)
        assert stats.batches_in == 10 and stats.batches_out == 6
        assert await _all(s) == [
            (0, 3, b"kb0"),
            (3, 6, b"kb2"),
            (9, 6, b"kb4"),
            (15, 6, b"kb6"),
            (21, 6, b"kb8"),
            (27, 3, b"kb9"),
        ]
        assert (s.start_offset, s.next_offset, s.confirm_offset) == (0, 30, 30)
        # a fetch inside a dropped batch gets the batch that now holds the offset
        got = await s.fetch(4, 30, 1)
        assert [(b.base_offset, bytes(b.payload)) for b in got] == [(3, b"kb2")]
        # appends go on after the rewritten range
        assert await s.append(b"after", 1) == 30
        assert (await s.fetch(30, 31, 100))[0].payload == b"after"

    async def test_rewrite_only_touches_batches_wholly_inside_the_range(
        self, engine: StreamEngine
    ) -> None:
        s = await engine.create_stream()
        for i in range(6):
            await s.append(b"b%d" % i, 2)
        await _committed(engine, s)

        def tag(run: list[StreamBatch]) -> list[StreamBatch]:
            return [StreamBatch(b.stream_id, b.base_offset, b.count, b"t") for b in run]

        await s.rewrite(3, 9, tag)  # [4, 6) and [6, 8) are wholly inside
        assert [p for _, _, p in await _all(s)] == [b"b0", b"b1", b"t", b"t", b"b4", b"b5"]

    async def test_a_transform_that_loses_offsets_is_refused_and_changes_nothing(
        self, engine: StreamEngine
    ) -> None:
        s = await engine.create_stream()
        for i in range(4):
            await s.append(b"b%d" % i, 2)
        await _committed(engine, s)
        before = await _all(s)

        def short(run: list[StreamBatch]) -> list[StreamBatch]:
            return run[:-1]

        with pytest.raises(ValueError):
            await s.rewrite(0, 8, short)
        assert await _all(s) == before

    async def test_other_streams_in_shared_objects_are_kept(self, engine: StreamEngine) -> None:
        a = await engine.create_stream()
        b = await engine.create_stream()
        for i in range(5):
            await asyncio.gather(a.append(b"a%d" % i, 1), b.append(b"b%d" % i, 1))
        await _committed(engine, a)
        await _committed(engine, b)
        await a.rewrite(0, 5, _keep_even)
        assert [p for _, _, p in await _all(a)] == [b"ka0", b"ka2", b"ka4"]
        assert [p for _, _, p in await _all(b)] == [b"b%d" % i for i in range(5)]

    async def test_a_transform_that_changes_nothing_rewrites_nothing(
        self, engine: StreamEngine
    ) -> None:
        s = await engine.create_stream()
        for i in range(5):
            await s.append(b"b%d" % i, 2)
        await _committed(engine, s)
        objects = (
            [o.key for o in engine._metadata.list_objects()]
            if isinstance(engine, S3StreamEngine)
            else []
        )
        stats = await s.rewrite(0, 10, list)
        assert stats.batches_in == 5
        assert [p for _, _, p in await _all(s)] == [b"b%d" % i for i in range(5)]
        if isinstance(engine, S3StreamEngine):
            assert [o.key for o in engine._metadata.list_objects()] == objects

    async def test_rewrite_after_trim_keeps_the_start(self, engine: StreamEngine) -> None:
        s = await engine.create_stream()
        for i in range(6):
            await s.append(b"b%d" % i, 1)
        await _committed(engine, s)
        await s.trim(2)
        await s.rewrite(0, 6, _keep_even)
        assert s.start_offset == 2
        assert [p for _, _, p in await _all(s, 2)] == [b"kb2", b"kb4", b"kb5"]


async def test_the_tail_not_in_object_storage_is_not_rewritten(tmp_path: Path) -> None:
    metadata = SqliteMetadataStore(tmp_path / "meta.db")
    objects = FileObjectStore(tmp_path / "objects")
    config = S3StreamConfig(
        wal_dir=tmp_path / "wal", upload_size_bytes=8 << 20, upload_interval_ms=60_000
    )
    eng = open_engine(config, metadata, objects)
    await eng.start()
    try:
        s = await eng.create_stream()
        for i in range(4):
            await s.append(b"b%d" % i, 1)
        await eng.flush()
        for i in range(4, 8):
            await s.append(b"b%d" % i, 1)
        assert s.committed_end == 4
        await s.rewrite(0, 8, _keep_even)
        assert [p for _, _, p in await _all(s)] == [
            b"kb0",
            b"kb2",
            b"kb3",
            b"b4",
            b"b5",
            b"b6",
            b"b7",
        ]
    finally:
        await eng.close()
        await objects.close()
        metadata.close()


async def _reopen(tmp_path: Path) -> tuple[S3StreamEngine, SqliteMetadataStore, FileObjectStore]:
    metadata = SqliteMetadataStore(tmp_path / "meta.db")
    objects = FileObjectStore(tmp_path / "objects")
    eng = open_engine(_config(tmp_path), metadata, objects)
    await eng.start()
    return eng, metadata, objects


async def test_a_crash_before_the_commit_leaves_the_old_range(tmp_path: Path) -> None:
    eng, metadata, objects = await _reopen(tmp_path)
    s = await eng.create_stream()
    for i in range(6):
        await s.append(b"b%d" % i, 1)
    await eng.flush()
    sid = s.stream_id

    class Killed(Exception):
        pass

    def crash(*_a: object, **_k: object) -> None:
        raise Killed("killed between the puts and the commit")

    metadata.commit_objects = crash  # type: ignore[method-assign]
    with pytest.raises(Killed):
        await s.rewrite(0, 6, _keep_even)
    await eng.close()
    metadata.close()
    eng2, metadata2, objects2 = await _reopen(tmp_path)
    try:
        s2 = await eng2.open_stream(sid)
        assert [p for _, _, p in await _all(s2)] == [b"b%d" % i for i in range(6)]
        # and a rewrite after the restart succeeds and survives the next one
        await s2.rewrite(0, 6, _keep_even)
    finally:
        await eng2.close()
        await objects2.close()
        metadata2.close()
    eng3, metadata3, objects3 = await _reopen(tmp_path)
    try:
        s3 = await eng3.open_stream(sid)
        assert [p for _, _, p in await _all(s3)] == [b"kb0", b"kb2", b"kb4", b"kb5"]
    finally:
        await eng3.close()
        await objects3.close()
        metadata3.close()
    await objects.close()


async def test_a_fetch_running_across_a_rewrite_sees_one_version(tmp_path: Path) -> None:
    eng, metadata, objects = await _reopen(tmp_path)
    try:
        s = await eng.create_stream()
        for i in range(40):
            await s.append(b"b%02d" % i, 1)
        await eng.flush()
        done = asyncio.Event()

        async def reader() -> list[list[bytes]]:
            seen: list[list[bytes]] = []
            while not done.is_set():
                got = await s.fetch(0, 40, 1 << 20)
                seen.append([bytes(b.payload) for b in got])
                await asyncio.sleep(0)
            return seen

        task = asyncio.create_task(reader())
        await asyncio.sleep(0.01)
        await s.rewrite(0, 40, _keep_even)
        await asyncio.sleep(0.01)
        done.set()
        old = [b"b%02d" % i for i in range(40)]
        new = [b"kb%02d" % i for i in range(0, 40, 2)] + [b"kb39"]
        for fetched in await task:
            assert fetched in (old, new)
    finally:
        await eng.close()
        await objects.close()
        metadata.close()


async def test_a_stream_another_broker_claimed_is_not_rewritten(tmp_path: Path) -> None:
    eng, metadata, objects = await _reopen(tmp_path)
    try:
        s = await eng.create_stream()
        for i in range(4):
            await s.append(b"b%d" % i, 1)
        await eng.flush()
        other = ("s3stream:other-broker/", metadata.claim_writer("s3stream:other-broker/"))
        metadata.claim_streams([s.stream_id], writer=other)
        with pytest.raises(StreamNotOwnedError):
            await s.rewrite(0, 4, _keep_even)
        assert [p for _, _, p in await _all(s)] == [b"b%d" % i for i in range(4)]
    finally:
        await eng.close()
        await objects.close()
        metadata.close()
