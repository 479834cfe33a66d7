"""Handing a stream over (a partition moving to another broker) while the
engine keeps taking appends for its other streams: the release uploads what
the released stream holds and returns; it does not wait for the other
streams' traffic to stop (which, under a steady load, it never does)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ingest.metadata import MemoryMetadataStore
from ingest.s3stream import S3StreamConfig, open_engine
from ingest.s3stream.objectstore import MemoryObjectStore

MIB = 1 << 20
OTHER_APPENDS = 3000


class SlowObjectStore(MemoryObjectStore):
    """PUTs take a few milliseconds, as on S3: appends arrive during each one."""

    puts = 0

    async def put(self, key: str, data: Any, *, if_absent: bool = False) -> None:
        self.puts += 1
        await asyncio.sleep(0.005)
        await super().put(key, data, if_absent=if_absent)


async def test_a_release_completes_while_other_streams_keep_appending(tmp_path: Path) -> None:
    config = S3StreamConfig.model_validate(
        {
            "wal_dir": tmp_path / "wal",
            "object_prefix": "streams/node-1/",
            "upload_size_bytes": 8 * MIB,
            "upload_interval_ms": 60_000,
            "log_cache_bytes": 8 * MIB,
            "block_cache_bytes": 4 * MIB,
        }
    )
    meta = MemoryMetadataStore()
    store = SlowObjectStore()
    engine = open_engine(config, meta, store)
    await engine.start()
    try:
        moving = await engine.acquire_stream((await engine.create_stream()).stream_id)
        staying = await engine.acquire_stream((await engine.create_stream()).stream_id)
        for i in range(20):
            await moving.append(b"m%d" % i, 1)
        done = 0
        flowing = asyncio.Event()

        async def keep_appending() -> None:
            nonlocal done
            for i in range(OTHER_APPENDS):
                await staying.append(b"s%d" % i, 1)
                done += 1
                if done == 10:
                    flowing.set()

        other = asyncio.create_task(keep_appending())
        await flowing.wait()  # the other stream's traffic is flowing
        puts_before = store.puts
        await engine.release_stream(moving.stream_id)
        puts = store.puts - puts_before
        released_at = done
        await other
        # one object carries what the stream holds (with whatever the others had
        # pending then); it does not keep uploading the others' new appends
        assert puts <= 2, puts
        assert released_at < OTHER_APPENDS
        record = meta.get_stream(moving.stream_id)
        assert record is not None and record.end_offset == 20  # every ack is in objects
    finally:
        await engine.close()
