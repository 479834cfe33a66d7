"""Storage engine benchmark: S3StreamEngine on a file WAL and a directory object store.

Usage::

    python bench/storage_bench.py [--dir /tmp/x] [--mib 512] [--seconds 5]

Scenarios:
- ``throughput``: ~1 MiB appends to 4 streams, 8 in flight per stream, with
  uploads running; reports MB/s of acknowledged (fsync'd) appends.
- ``catch-up-read-16k``: write 16 KiB batches, restart (empty caches), read
  the stream back from objects with 1 MiB fetches.
- ``latency-16k@20MB/s`` / ``latency-1m@20MB/s``: paced appends totalling
  20 MB/s; reports append latency percentiles (call to durable ack).

Prints a table and writes JSON to ``bench/results/storage_bench.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ingest.metadata import SqliteMetadataStore  # noqa: E402
from ingest.s3stream import S3StreamConfig, S3StreamEngine, open_engine  # noqa: E402
from ingest.s3stream.objectstore import FileObjectStore  # noqa: E402

MIB = 1 << 20


async def _open(d: Path) -> tuple[S3StreamEngine, SqliteMetadataStore]:
    metadata = SqliteMetadataStore(d / "meta.db")
    engine = open_engine(
        S3StreamConfig(wal_dir=d / "wal"), metadata, FileObjectStore(d / "objects")
    )
    await engine.start()
    return engine, metadata


async def throughput(d: Path, total_mib: int) -> dict[str, Any]:
    engine, metadata = await _open(d)
    streams = [await engine.create_stream() for _ in range(4)]
    payload = os.urandom(MIB)
    per_stream = total_mib // len(streams)

    async def run(s: Any) -> None:
        window: list[Any] = []
        for _ in range(per_stream):
            window.append(s.append(payload, 100))
            if len(window) >= 8:
                await window.pop(0)
        for f in window:
            await f

    t = time.perf_counter()
    await asyncio.gather(*(run(s) for s in streams))
    dt = time.perf_counter() - t
    uploads = engine.uploads
    await engine.close()
    metadata.close()
    result = {
        "scenario": "throughput",
        "MB/s": round(per_stream * len(streams) * MIB / dt / 1e6, 1),
        "appends": per_stream * len(streams),
        "uploads": uploads,
    }
    return result


async def catch_up_read(d: Path, total_mib: int) -> dict[str, Any]:
    """Write ``total_mib`` of 16 KiB batches, restart (empty caches), read it all back."""
    engine, metadata = await _open(d)
    s = await engine.create_stream()
    payload = os.urandom(16 * 1024)
    window: list[Any] = []
    for _ in range(total_mib * 64):
        window.append(s.append(payload, 10))
        if len(window) >= 64:
            await window.pop(0)
    for f in window:
        await f
    await engine.close()
    metadata.close()
    engine, metadata = await _open(d)
    s = await engine.open_stream(s.stream_id)
    t = time.perf_counter()
    pos, read = 0, 0
    while pos < s.confirm_offset:
        batches = await s.fetch(pos, s.confirm_offset, MIB)
        read += sum(len(b.payload) for b in batches)
        pos = batches[-1].end_offset
    dt = time.perf_counter() - t
    await engine.close()
    metadata.close()
    return {"scenario": "catch-up-read-16k", "MB/s": round(read / dt / 1e6, 1), "uploads": 0}


async def latency(d: Path, size: int, seconds: float, rate_bytes: float) -> dict[str, Any]:
    engine, metadata = await _open(d)
    streams = [await engine.create_stream() for _ in range(4)]
    payload = os.urandom(size)
    interval = size / rate_bytes
    lat: list[float] = []
    tasks: list[asyncio.Task[None]] = []

    async def one(s: Any) -> None:
        t0 = time.perf_counter()
        await s.append(payload, 10)
        lat.append(time.perf_counter() - t0)

    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < seconds:
        tasks.append(asyncio.ensure_future(one(streams[n % len(streams)])))
        n += 1
        target = start + n * interval
        delay = target - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    uploads = engine.uploads
    await engine.close()
    metadata.close()
    lat.sort()

    def pct(p: float) -> float:
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3, 3)

    return {
        "scenario": f"latency-{size // 1024}k@{rate_bytes / 1e6:.0f}MB/s",
        "appends": len(lat),
        "p50 ms": pct(0.50),
        "p99 ms": pct(0.99),
        "max ms": round(lat[-1] * 1e3, 3),
        "uploads": uploads,
    }


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument(
        "--switch-interval",
        type=float,
        default=None,
        help="sys.setswitchinterval (s); the WAL writer thread waits this long for the GIL "
        "when the event loop is busy",
    )
    args = ap.parse_args()
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    base = Path(tempfile.mkdtemp(prefix="storage-bench-", dir=args.dir))
    results = []
    try:
        for name, coro in (
            ("t", lambda d: throughput(d, args.mib)),
            ("r", lambda d: catch_up_read(d, min(args.mib, 128))),
            ("l16", lambda d: latency(d, 16 * 1024, args.seconds, 20e6)),
            ("l1m", lambda d: latency(d, MIB, args.seconds, 20e6)),
        ):
            d = base / name
            d.mkdir()
            results.append(await coro(d))
            shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    keys = sorted({k for r in results for k in r if k != "scenario"})
    print(f"{'scenario':<24}" + "".join(f"{k:>12}" for k in keys))
    for r in results:
        print(f"{r['scenario']:<24}" + "".join(f"{r.get(k, ''):>12}" for k in keys))
    load = os.getloadavg()
    print(f"load average during the run: {load[0]:.2f} (1 min) on {os.cpu_count()} cores")
    out = Path(__file__).with_name("results") / "storage_bench.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"load_average": load[0], "results": results}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
