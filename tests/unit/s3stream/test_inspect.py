"""storage inspect: objects listed from their own indexes and checked against metadata."""

from __future__ import annotations

import os
from pathlib import Path

from ingest.metadata import MemoryMetadataStore
from ingest.s3stream import S3StreamConfig, open_engine
from ingest.s3stream.inspect import inspect_storage
from ingest.s3stream.objectstore import MemoryObjectStore


async def _setup(tmp_path: Path) -> tuple[MemoryObjectStore, MemoryMetadataStore, list[int]]:
    store = MemoryObjectStore()
    metadata = MemoryMetadataStore()
    config = S3StreamConfig(
        wal_dir=tmp_path / "wal", upload_size_bytes=1 << 20, stream_object_bytes=50_000
    )
    engine = open_engine(config, metadata, store)
    await engine.start()
    a, b = await engine.create_stream(), await engine.create_stream()
    for _ in range(2):
        for _ in range(10):
            await a.append(os.urandom(10_000), 1)
            await b.append(b"small", 1)
        await engine.flush()
    await engine.close()
    return store, metadata, [a.stream_id, b.stream_id]


async def test_a_healthy_store_lists_every_object_with_its_ranges(tmp_path: Path) -> None:
    store, metadata, (a, b) = await _setup(tmp_path)
    report = await inspect_storage(store, metadata)
    assert report.ok, report.problems
    assert sorted(o.kind for o in report.objects) == [
        "stream",
        "stream",
        "stream_set",
        "stream_set",
    ]
    assert all(o.status == "ok" for o in report.objects)
    ranges = sorted(
        (e.stream_id, e.start_offset, e.end_offset) for o in report.objects for e in o.ranges
    )
    assert ranges == [(a, 0, 10), (a, 10, 20), (b, 0, 10), (b, 10, 20)]


async def test_missing_corrupt_and_orphan_objects_are_reported(tmp_path: Path) -> None:
    store, metadata, (a, _b) = await _setup(tmp_path)
    keys = sorted(store.objects)
    del store.objects[keys[0]]
    body = bytearray(store.objects[keys[1]])
    body[-3] ^= 0xFF
    store.objects[keys[1]] = bytes(body)
    store.objects["streams/99999999999999999999.sso"] = store.objects[keys[2]]
    report = await inspect_storage(store, metadata)
    status = {o.key: o.status for o in report.objects}
    assert status[keys[0]] == "missing"
    assert status[keys[1]] == "corrupt"
    assert status["streams/99999999999999999999.sso"] == "orphan"
    assert not report.ok
    assert any("in no object" in p for p in report.problems)
