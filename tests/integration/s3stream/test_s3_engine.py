"""The StreamEngine contract over S3StreamEngine with its objects on S3 (moto server)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ingest.metadata import SqliteMetadataStore
from ingest.s3stream import S3StreamConfig, S3StreamEngine, StreamEngine, open_engine
from ingest.s3stream.objectstore import open_object_store
from tests.integration.s3stream.conftest import BUCKET, s3_options
from tests.unit.s3stream.engine_contract import StreamEngineContract


@pytest.fixture
async def engine(tmp_path: Path, moto_endpoint: str) -> AsyncIterator[StreamEngine]:
    metadata = SqliteMetadataStore(tmp_path / "meta.db")
    objects = open_object_store(f"s3://{BUCKET}/{uuid.uuid4().hex}", **s3_options(moto_endpoint))
    config = S3StreamConfig(
        wal_dir=tmp_path / "wal", upload_size_bytes=64 * 1024, log_cache_bytes=1 << 20
    )
    engine = open_engine(config, metadata, objects)
    await engine.start()
    yield engine
    await engine.close()
    await objects.close()
    metadata.close()


class TestS3StreamEngineOnS3(StreamEngineContract):
    pass


async def test_data_read_back_from_s3_after_restart(tmp_path: Path, moto_endpoint: str) -> None:
    metadata = SqliteMetadataStore(tmp_path / "meta.db")
    prefix = f"s3://{BUCKET}/{uuid.uuid4().hex}"
    objects = open_object_store(prefix, **s3_options(moto_endpoint))
    config = S3StreamConfig(wal_dir=tmp_path / "wal", upload_size_bytes=256 * 1024)
    engine = open_engine(config, metadata, objects)
    await engine.start()
    s = await engine.create_stream()
    payloads = [os.urandom(50_000) for _ in range(30)]
    for p in payloads:
        await s.append(p, 1)
    await engine.close()
    assert len(await objects.list()) >= 2

    engine2: S3StreamEngine = open_engine(config, metadata, objects)
    await engine2.start()
    s2 = await engine2.open_stream(s.stream_id)
    got: list[bytes] = []
    while len(got) < 30:
        got.extend(bytes(b.payload) for b in await s2.fetch(len(got), 30, 1 << 20))
    assert got == payloads
    await engine2.close()
    await objects.close()
    metadata.close()
