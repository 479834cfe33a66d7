"""File WAL append latency with trimmed segments deleted vs recycled.

Usage::

    python bench/wal_recycle_bench.py [--seconds 10] [--rounds 3] [--dir /path/on/the/wal/disk]

Appends 16 KiB records at 20 MB/s to a :class:`FileWriteAheadLog` with the
default 64 MiB segments, trimming the log 8 MiB behind its head every 250 ms
(as uploads do), so a segment is dropped about every 3 s. Windows with
``recycled_segments=0`` (every trimmed segment deleted) and ``=2`` (kept and
overwritten) alternate ``--rounds`` times each, in fresh directories, after a
warm-up that leaves the recycling side its spares. For each side: append
latency p50 / p99 / max over all its windows, how long the trims took, and
the slowest append that started within 300 ms after a trim.

Prints a table and writes JSON to ``bench/results/wal_recycle_bench.json``.
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

from ingest.runtime import tune_for_latency  # noqa: E402
from ingest.s3stream.wal import FileWriteAheadLog  # noqa: E402

MIB = 1 << 20
RECORD = 16 * 1024
RATE = 20e6
LAG = 8 * MIB


def _pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(p * len(s)))] * 1e3, 2)


async def _window(
    wal: FileWriteAheadLog, seconds: float
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """Paced appends for ``seconds``: ([(start, latency)], [(trim start, trim time)])."""
    payload = os.urandom(RECORD)
    lat: list[tuple[float, float]] = []
    trims: list[tuple[float, float]] = []
    tasks: list[asyncio.Task[None]] = []
    offset = [0]

    async def one() -> None:
        t = time.perf_counter()
        h = wal.append(1, offset[0], 1, payload)
        offset[0] += 1
        await h.done
        lat.append((t, time.perf_counter() - t))

    async def trimmer(stop: asyncio.Event) -> None:
        while not stop.is_set():
            await asyncio.sleep(0.25)
            t = time.perf_counter()
            await wal.trim(wal.next_position - LAG)
            if time.perf_counter() - t > 0.0005:  # a segment went
                trims.append((t, time.perf_counter() - t))

    stop = asyncio.Event()
    trim_task = asyncio.create_task(trimmer(stop))
    interval = RECORD / RATE
    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < seconds:
        tasks.append(asyncio.create_task(one()))
        n += 1
        await asyncio.sleep(max(0.0, start + n * interval - time.perf_counter()))
    await asyncio.gather(*tasks)
    stop.set()
    await trim_task
    return lat, trims


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the WALs go (default: the temp dir)")
    args = ap.parse_args()
    tune_for_latency()
    base = Path(tempfile.mkdtemp(prefix="wal-recycle-", dir=args.dir))
    sides: dict[int, dict[str, list[Any]]] = {
        k: {"lat": [], "trim": [], "after": []} for k in (0, 2)
    }
    try:
        for rnd in range(args.rounds):
            for recycled in (0, 2) if rnd % 2 == 0 else (2, 0):
                d = base / f"r{rnd}-{recycled}"
                wal = FileWriteAheadLog(d, recycled_segments=recycled)
                await wal.start()
                await _window(wal, 3 * 64 * MIB / RATE)  # warm-up: three segments
                lat, trims = await _window(wal, args.seconds)
                await wal.close()
                shutil.rmtree(d, ignore_errors=True)
                side = sides[recycled]
                side["lat"] += [x for _, x in lat]
                side["trim"] += [x for _, x in trims]
                for t, _ in trims:
                    near = [x for s, x in lat if t <= s < t + 0.3]
                    if near:
                        side["after"].append(max(near))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    rows: list[dict[str, Any]] = []
    for recycled, side in sides.items():
        after = sorted(side["after"])
        rows.append(
            {
                "scenario": "deleted" if recycled == 0 else f"recycled ({recycled} spares)",
                "appends": len(side["lat"]),
                "p50 ms": _pct(side["lat"], 0.5),
                "p99 ms": _pct(side["lat"], 0.99),
                "max ms": _pct(side["lat"], 1.0),
                "trims": len(side["trim"]),
                "trim p50 ms": _pct(side["trim"], 0.5) if side["trim"] else None,
                "worst append after a trim, median ms": (
                    round(after[len(after) // 2] * 1e3, 1) if after else None
                ),
            }
        )
    keys = [k for k in rows[0] if k != "scenario"]
    print(f"{'scenario':<22}" + "".join(f"{k:>16}" for k in keys[:-1]) + f"  {keys[-1]}")
    for r in rows:
        print(
            f"{r['scenario']:<22}"
            + "".join(f"{str(r[k]):>16}" for k in keys[:-1])
            + f"  {r[keys[-1]]}"
        )
    out = Path(__file__).with_name("results") / "wal_recycle_bench.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"results": rows, "seconds": args.seconds}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
