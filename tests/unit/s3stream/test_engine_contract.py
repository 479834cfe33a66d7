"""The StreamEngine contract over the memory engine and S3StreamEngine (file WAL + directory)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ingest.metadata import SqliteMetadataStore
from ingest.s3stream import MemoryStreamEngine, S3StreamConfig, StreamEngine, open_engine
from ingest.s3stream.objectstore import FileObjectStore
from tests.unit.s3stream.engine_contract import StreamEngineContract


@pytest.fixture(params=["memory", "s3stream-file", "s3stream-file-tiny-uploads"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StreamEngine]:
    if request.param == "memory":
        mem = MemoryStreamEngine()
        await mem.start()
        yield mem
        await mem.close()
        return
    metadata = SqliteMetadataStore(tmp_path / "meta.db")
    objects = FileObjectStore(tmp_path / "objects")
    tiny = request.param.endswith("tiny-uploads")
    config = S3StreamConfig(
        wal_dir=tmp_path / "wal",
        # tiny uploads: nearly every append goes to an object, exercising object reads
        upload_size_bytes=1 if tiny else 8 << 20,
        upload_interval_ms=10 if tiny else 5000,
        log_cache_bytes=1 << 20,
    )
    engine = open_engine(config, metadata, objects)
    await engine.start()
    yield engine
    await engine.close()
    await objects.close()
    metadata.close()


class TestStreamEngineContract(StreamEngineContract):
    pass
