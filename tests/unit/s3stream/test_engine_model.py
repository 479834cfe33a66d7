"""S3StreamEngine against the memory engine as a model, over random operation sequences."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingest.metadata import SqliteMetadataStore
from ingest.s3stream import MemoryStreamEngine, S3StreamConfig, S3StreamEngine, open_engine
from ingest.s3stream.errors import OffsetOutOfRangeError
from ingest.s3stream.objectstore import FileObjectStore

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 1), st.integers(0, 70_000), st.integers(1, 5)),
        st.tuples(st.just("fetch"), st.integers(0, 1), st.integers(0, 60), st.integers(1, 200_000)),
        st.tuples(st.just("trim"), st.integers(0, 1), st.integers(0, 40), st.just(0)),
        st.tuples(st.just("flush"), st.just(0), st.just(0), st.just(0)),
        st.tuples(st.just("compact"), st.just(0), st.just(0), st.just(0)),
        st.tuples(st.just("crash"), st.just(0), st.just(0), st.just(0)),
        st.tuples(st.just("restart"), st.just(0), st.just(0), st.just(0)),
    ),
    max_size=40,
)


def _config(d: Path) -> S3StreamConfig:
    return S3StreamConfig(
        wal_dir=d / "wal",
        wal_segment_bytes=1 << 20,
        upload_size_bytes=200_000,
        upload_interval_ms=60_000,
        log_cache_bytes=1 << 20,
        block_cache_bytes=300_000,
        compaction_small_bytes=150_000,
        compaction_target_bytes=400_000,
    )


async def _open(d: Path) -> tuple[S3StreamEngine, SqliteMetadataStore]:
    md = SqliteMetadataStore(d / "meta.db")
    engine = open_engine(_config(d), md, FileObjectStore(d / "objects"))
    await engine.start()
    return engine, md


async def _crash(engine: S3StreamEngine) -> None:
    engine._closed = True
    if engine._uploader is not None:
        engine._uploader.cancel()
        try:
            await engine._uploader
        except asyncio.CancelledError:
            pass
    await engine._wal.close()


def _view(batches: list[Any]) -> list[tuple[int, int, bytes]]:
    return [(b.base_offset, b.count, bytes(b.payload)) for b in batches]


async def _run(ops: list[tuple[str, int, int, int]], d: Path) -> None:
    model = MemoryStreamEngine()
    await model.start()
    engine, md = await _open(d)
    ids = []
    for _ in range(2):
        real = await engine.create_stream()
        await model.create_stream()
        ids.append(real.stream_id)
    n = 0
    for op, idx, a, b in ops:
        real_s = await engine.open_stream(ids[idx])
        model_s = await model.open_stream(idx + 1)
        if op == "append":
            n += 1
            payload = n.to_bytes(4, "big") * (a // 4 + 1)
            assert await real_s.append(payload, b) == await model_s.append(payload, b)
        elif op == "fetch":
            start = model_s.start_offset + a
            try:
                want = _view(await model_s.fetch(start, model_s.confirm_offset, b))
            except OffsetOutOfRangeError:
                want = None
            try:
                got = _view(await real_s.fetch(start, real_s.confirm_offset, b))
            except OffsetOutOfRangeError:
                got = None
            assert got == want
        elif op == "trim":
            to = min(model_s.start_offset + a, model_s.confirm_offset)
            await model_s.trim(to)
            await real_s.trim(to)
        elif op == "flush":
            await engine.flush()
            await engine.collect_garbage()
        elif op == "compact":
            await engine.compact()
        else:
            if op == "crash":
                await _crash(engine)
            else:
                await engine.close()
            md.close()
            engine, md = await _open(d)
        for i in range(2):
            r = await engine.open_stream(ids[i])
            m = await model.open_stream(i + 1)
            assert (r.next_offset, r.confirm_offset) == (m.next_offset, m.confirm_offset)
            assert r.start_offset == m.start_offset
    for i in range(2):
        r = await engine.open_stream(ids[i])
        m = await model.open_stream(i + 1)
        start = m.start_offset
        assert _view(await r.fetch(start, r.confirm_offset, 1 << 30)) == _view(
            await m.fetch(start, m.confirm_offset, 1 << 30)
        )
    await engine.close()
    md.close()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(_ops)
def test_engine_matches_the_memory_model(ops: list[tuple[str, int, int, int]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        asyncio.run(_run(ops, Path(d)))
