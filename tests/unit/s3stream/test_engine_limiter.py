"""The engine's network limiter: reads from objects yield to produce."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from ingest.metadata import SqliteMetadataStore
from ingest.s3stream import S3StreamConfig, open_engine
from ingest.s3stream.network import TrafficClass
from ingest.s3stream.objectstore import MemoryObjectStore

MIB = 1 << 20


def _config(tmp_path: Path, **kw: object) -> S3StreamConfig:
    base: dict[str, object] = {
        "wal_dir": tmp_path / "wal",
        "upload_size_bytes": 256 * 1024,
        "upload_interval_ms": 60_000,
        "log_cache_bytes": MIB,
        "block_cache_bytes": 8 * MIB,
        "read_ahead_ranges": 0,
        # catch-up reads get 0.5 of 2 MB/s while anything is produced
        "network_busy_bytes_per_second": 2_000_000,
        "network_share_catch_up_read": 0.5,
    }
    base.update(kw)
    return S3StreamConfig.model_validate(base)


async def test_a_catch_up_read_is_capped_only_while_something_is_produced(
    tmp_path: Path,
) -> None:
    metadata = SqliteMetadataStore(tmp_path / "meta.db")
    objects = MemoryObjectStore()
    writer = open_engine(_config(tmp_path), metadata, objects)
    await writer.start()
    history = await writer.create_stream()
    payloads = [os.urandom(64 * 1024) for _ in range(40)]  # 2.5 MiB in 10 objects
    for p in payloads:
        await history.append(p, 1)
    await writer.close()

    # idle: nothing produced, the read runs at full speed
    engine = open_engine(_config(tmp_path), metadata, objects)
    await engine.start()
    stream = await engine.open_stream(history.stream_id)
    t = time.monotonic()
    idle = await _read(stream)
    idle_s = time.monotonic() - t
    assert idle == payloads
    assert engine.rate_limiter.waited_s[TrafficClass.CATCH_UP_READ] == 0
    await engine.close()

    # busy: a producer appends every 20 ms while the same read runs
    engine = open_engine(_config(tmp_path), metadata, objects)
    await engine.start()
    stream = await engine.open_stream(history.stream_id)
    live = await engine.create_stream()
    stop = asyncio.Event()
    acked: list[float] = []

    async def produce() -> None:
        while not stop.is_set():
            t0 = time.monotonic()
            await live.append(b"x" * 100, 1)
            acked.append(time.monotonic() - t0)
            await asyncio.sleep(0.02)

    producer = asyncio.create_task(produce())
    await asyncio.sleep(0.05)
    t = time.monotonic()
    busy = await _read(stream)
    busy_s = time.monotonic() - t
    stop.set()
    await producer
    assert busy == payloads
    # 2.5 MiB at 1 MB/s after a 1 MB burst: well over a second of waiting
    assert engine.rate_limiter.waited_s[TrafficClass.CATCH_UP_READ] > 1.0
    assert busy_s > 1.0 > idle_s
    assert acked and live.confirm_offset == len(acked)  # produce never waited on it
    await engine.close()
    metadata.close()


async def _read(stream: object) -> list[bytes]:
    out: list[bytes] = []
    pos = 0
    while pos < stream.confirm_offset:  # type: ignore[attr-defined]
        batches = await stream.fetch(pos, stream.confirm_offset, 256 * 1024)  # type: ignore[attr-defined]
        out.extend(bytes(b.payload) for b in batches)
        pos = batches[-1].end_offset
    return out
