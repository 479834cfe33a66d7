"""Faults between the engine and S3 (a proxy returning 500s, slow answers and
dropped connections): nothing acknowledged is lost, uploads complete once the
faults stop. With the file WAL, appends keep being acknowledged throughout."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.metadata import SqliteMetadataStore
from ingest.s3stream import S3StreamConfig, open_engine
from ingest.s3stream.objectstore import open_object_store
from tests.integration.s3stream.conftest import BUCKET, s3_options
from tests.integration.s3stream.fault_proxy import FaultProxy


@pytest.fixture
def proxy(moto_endpoint: str) -> Iterator[FaultProxy]:
    p = FaultProxy(moto_endpoint, delay=2.5).start()
    yield p
    p.close()


@pytest.mark.parametrize("wal_kind", ["file", "object"])
async def test_nothing_is_lost_and_uploads_complete_after_s3_faults(
    tmp_path: Path, proxy: FaultProxy, wal_kind: str
) -> None:
    opts = dict(s3_options(proxy.endpoint), max_attempts=2, read_timeout=1.0, connect_timeout=1.0)
    prefix = f"s3://{BUCKET}/{uuid.uuid4().hex}"
    objects = open_object_store(prefix, **opts)
    metadata = SqliteMetadataStore(tmp_path / "meta.db")
    config = S3StreamConfig(
        wal_kind=wal_kind,  # type: ignore[arg-type]
        wal_dir=tmp_path / "wal",
        upload_size_bytes=64 * 1024,
        upload_interval_ms=100,
        log_cache_bytes=1 << 20,
    )
    engine = open_engine(config, metadata, objects)
    await engine.start()
    s = await engine.create_stream()
    payloads = [os.urandom(2000) for _ in range(300)]
    pending = [s.append(p, 1) for p in payloads[:100]]
    await asyncio.gather(*pending)

    proxy.mode = "mixed"
    during = [s.append(p, 1) for p in payloads[100:200]]
    if wal_kind == "file":  # acknowledged from the local WAL while S3 fails
        await asyncio.wait_for(asyncio.gather(*during), 10)
    await asyncio.sleep(3)
    assert proxy.faults > 0
    proxy.mode = "ok"
    after = [s.append(p, 1) for p in payloads[200:]]
    await asyncio.wait_for(asyncio.gather(*during, *after), 60)
    await asyncio.wait_for(engine.flush(), 60)
    rec = metadata.get_stream(s.stream_id)
    assert rec is not None and rec.end_offset == 300  # every batch committed to objects
    await engine.close()

    # a fresh engine reading only from S3 sees every batch exactly once
    clean = open_object_store(prefix, **s3_options(proxy.endpoint))
    engine2 = open_engine(config.model_copy(update={"wal_dir": tmp_path / "wal2"}), metadata, clean)
    await engine2.start()
    s2 = await engine2.open_stream(s.stream_id)
    got: list[bytes] = []
    while len(got) < 300:
        batches = await s2.fetch(len(got), 300, 1 << 20)
        assert batches
        got.extend(bytes(b.payload) for b in batches)
    assert got == payloads
    await engine2.close()
    await objects.close()
    await clean.close()
    metadata.close()
