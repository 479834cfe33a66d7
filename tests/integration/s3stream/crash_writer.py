"""Appends to two streams until killed, printing every acknowledged batch.

Usage: python crash_writer.py DATA_DIR. Each line ``ACK <stream_id> <index>``
is printed (and flushed) only after the append's awaitable resolved, i.e.
once the batch is durable. Batch ``j`` of a stream has ``count_of(j)``
offsets and the payload ``payload_of(stream_id, j)``.
"""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

from ingest.metadata import SqliteMetadataStore
from ingest.s3stream import S3StreamConfig, open_engine
from ingest.s3stream.objectstore import FileObjectStore

IN_FLIGHT = 16


def count_of(j: int) -> int:
    return 1 + j % 5


def payload_of(stream_id: int, j: int) -> bytes:
    rnd = random.Random(stream_id * 1_000_003 + j)
    size = rnd.choice((10, 500, 4000, 60_000))
    return j.to_bytes(8, "big") + rnd.randbytes(size)


def config(data: Path) -> S3StreamConfig:
    return S3StreamConfig(
        wal_dir=data / "wal",
        wal_segment_bytes=1 << 20,
        upload_size_bytes=512 * 1024,
        upload_interval_ms=100,
        log_cache_bytes=2 << 20,
        block_cache_bytes=2 << 20,
        compaction_interval_ms=200,  # compaction runs (and gets killed) too
        compaction_small_bytes=1 << 20,
        compaction_target_bytes=4 << 20,
    )


async def main(data: Path) -> None:
    metadata = SqliteMetadataStore(data / "meta.db")
    engine = open_engine(config(data), metadata, FileObjectStore(data / "objects"))
    await engine.start()
    ids = metadata.get_kv("crash.streams")
    if ids is None:
        streams = [await engine.create_stream() for _ in range(2)]
        metadata.put_kv("crash.streams", ",".join(str(s.stream_id) for s in streams))
    else:
        streams = [await engine.open_stream(int(i)) for i in ids.split(",")]
    print("READY", flush=True)

    async def writer(stream_index: int) -> None:
        s = streams[stream_index]
        j, offset = 0, 0
        while offset < s.next_offset:
            offset += count_of(j)
            j += 1
        assert offset == s.next_offset
        pending: list[tuple[int, asyncio.Future[int]]] = []
        while True:
            fut = asyncio.ensure_future(s.append(payload_of(s.stream_id, j), count_of(j)))
            pending.append((j, fut))
            j += 1
            if len(pending) >= IN_FLIGHT:
                k, f = pending.pop(0)
                await f
                sys.stdout.write(f"ACK {s.stream_id} {k}\n")
                sys.stdout.flush()

    await asyncio.gather(writer(0), writer(1))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
