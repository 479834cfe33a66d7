"""What one upload costs the event loop (issue #18): its bookkeeping on the
loop, and how long the loop waits for the GIL while the object is built.

An upload of the paced 20 MB/s produce run holds about 6,000 batches of
1.1 KB (2 s of 4 partitions x 740 requests a second). Two rows for each of
the upload's steps, in alternating rounds of one run:

- **loop**: picking what to upload, marking it picked and, after the put,
  uploaded, on a log cache of those batches: the per-entry walks this
  checkout replaced (rebuilt here, as the engine did them up to session 24)
  next to ``LogCache.pending_with_bytes`` / ``mark_picked`` /
  ``mark_uploaded``;
- **build**: laying out the object, ``encode`` + ``concat`` in Python next
  to ``build_object`` (the batch lists and the C data section), on a worker thread as the
  engine runs it, while a second thread stands in for the event loop:
  it sleeps 0.2 ms at a time and records how late each wake-up is, which
  is how long it waited for the GIL (and for the CPU). The build's own wall
  time and the waits' p99 and max are the rows.

Medians of ``--rounds``; prints a table and writes
bench/results/upload_build.json.

    python -m bench.upload_build_bench [--rounds 5] [--batches 6000]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ingest.s3stream.api import StreamBatch  # noqa: E402
from ingest.s3stream.cache import CacheEntry, LogCache  # noqa: E402
from ingest.s3stream.objects import format as fmt  # noqa: E402
from ingest.s3stream.upload import build_object  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
_STREAMS = 4
_LIMIT = 8 << 20  # upload_size_bytes' default


def _cache(batches: int, payload: bytes) -> LogCache:
    c = LogCache(256 << 20)
    for i in range(batches // _STREAMS):
        for s in range(_STREAMS):
            c.put(StreamBatch(s, i * 27, 27, payload), i)
    return c


def _walk_pending(c: LogCache, sid: int, below: int, max_bytes: int) -> list[CacheEntry]:
    """The per-entry walk of the log cache's ``pending`` before this change."""
    log = c._streams[sid]
    out: list[CacheEntry] = []
    total = 0
    for i in range(log.picked_idx, len(log.entries)):
        e = log.entries[i]
        if e.batch.end_offset > below or total >= max_bytes:
            break
        out.append(e)
        total += e.size
    return out


def _loop_walks(c: LogCache) -> list[list[StreamBatch]]:
    """Before: the per-entry walks, and the upload's batch lists and sizes
    taken on the loop (``UploadBuilder.put``)."""
    picked = []
    total = 0
    for sid in sorted(c.streams_with_pending()):
        take: list[CacheEntry] = []
        for e in _walk_pending(c, sid, 1 << 62, _LIMIT - total):
            take.append(e)
            total += e.size
        picked.append((sid, take))
    _size = sum(e.size for _, entries in picked for e in entries)
    for sid, entries in picked:  # mark_picked, then mark_uploaded: a walk each
        log = c._streams[sid]
        end = entries[-1].batch.end_offset
        while log.picked_idx < len(log.entries) and log.entries[log.picked_idx].batch.end_offset <= end:
            log.picked_idx += 1
        flags = []
        while log.upload_idx < len(log.entries) and log.entries[log.upload_idx].batch.end_offset <= end:
            flags.append((sid, log.entries[log.upload_idx]))
            log.upload_idx += 1
    ranges = []
    for _, entries in picked:
        ranges.append([e.batch for e in entries])
        _size = sum(e.size for e in entries)
    return ranges


def _loop_indexed(c: LogCache) -> list[list[CacheEntry]]:
    """Now: index arithmetic; the batch lists are the builder thread's."""
    picked = []
    total = 0
    for sid in sorted(c.streams_with_pending()):
        take, size = c.pending_with_bytes(sid, 1 << 62, _LIMIT - total)
        picked.append((sid, take))
        total += size
    for sid, entries in picked:
        c.mark_picked(sid, entries[-1].batch.end_offset)
    for sid, entries in picked:
        c.mark_uploaded(sid, entries[-1].batch.end_offset)
    return [entries for _, entries in picked]


def _python_build(ranges: list[list[StreamBatch]]) -> object:
    buffers, index = fmt.encode(ranges)
    return fmt.concat(buffers), index


def _build_with_loop(build: Callable[[], object]) -> dict[str, float]:
    """Run ``build`` on a thread while this thread sleeps 0.2 ms at a time."""
    late: list[float] = []
    done = threading.Event()
    took: list[float] = []

    def worker() -> None:
        t = time.perf_counter()
        build()
        took.append(time.perf_counter() - t)
        done.set()

    th = threading.Thread(target=worker)
    th.start()
    while not done.is_set():
        t = time.perf_counter()
        time.sleep(0.0002)
        late.append((time.perf_counter() - t - 0.0002) * 1000)
    th.join()
    late.sort()
    return {
        "build_ms": took[0] * 1000,
        "wait_p99_ms": late[int(len(late) * 0.99)] if late else 0.0,
        "wait_max_ms": late[-1] if late else 0.0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batches", type=int, default=6000)
    ap.add_argument("--batch-bytes", type=int, default=1100)
    args = ap.parse_args()
    if fmt._NATIVE is None:
        print("ingest.s3stream.objects._objencode is not built", file=sys.stderr)
        return 1
    sys.setswitchinterval(0.001)  # as the broker runs (ingest/runtime.py)
    payload = os.urandom(args.batch_bytes)
    rows: dict[str, list[dict[str, float]]] = {k: [] for k in ("walks", "indexed", "python", "c")}
    for r in range(args.rounds):
        sides = ["walks", "indexed"] if r % 2 == 0 else ["indexed", "walks"]
        batches: list[list[StreamBatch]] = []
        entries: list[list[CacheEntry]] = []
        for side in sides:
            c = _cache(args.batches, payload)
            t = time.perf_counter()
            if side == "walks":
                batches = _loop_walks(c)
            else:
                entries = _loop_indexed(c)
            rows[side].append({"loop_ms": (time.perf_counter() - t) * 1000})
        for side in (["python", "c"] if r % 2 == 0 else ["c", "python"]):
            if side == "python":
                rows[side].append(_build_with_loop(functools.partial(_python_build, batches)))
            else:
                rows[side].append(_build_with_loop(functools.partial(build_object, entries)))
        print(
            f"round {r}: loop {rows['walks'][-1]['loop_ms']:.2f} -> {rows['indexed'][-1]['loop_ms']:.2f} ms, "
            f"build {rows['python'][-1]['build_ms']:.2f} -> {rows['c'][-1]['build_ms']:.2f} ms, "
            f"loop's GIL wait max {rows['python'][-1]['wait_max_ms']:.2f} -> {rows['c'][-1]['wait_max_ms']:.2f} ms",
            flush=True,
        )
    med = {
        side: {k: statistics.median(x[k] for x in v) for k in v[0]} for side, v in rows.items()
    }
    print(f"\none upload of {args.batches} batches of {args.batch_bytes} B, medians of {args.rounds} rounds")
    print(f"{'':44}{'before':>10}{'now':>10}")
    print(f"{'on the loop: pick, mark, batch lists':44}{med['walks']['loop_ms']:>8.2f}ms{med['indexed']['loop_ms']:>8.2f}ms")
    print(f"{'build the object (worker thread)':44}{med['python']['build_ms']:>8.2f}ms{med['c']['build_ms']:>8.2f}ms")
    print(f"{'  the loop thread waits meanwhile, p99':44}{med['python']['wait_p99_ms']:>8.2f}ms{med['c']['wait_p99_ms']:>8.2f}ms")
    print(f"{'  the loop thread waits meanwhile, max':44}{med['python']['wait_max_ms']:>8.2f}ms{med['c']['wait_max_ms']:>8.2f}ms")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "upload_build.json"
    out.write_text(json.dumps({
        "benchmark": "upload_build", "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": vars(args), "medians": med, "rounds": rows,
    }, indent=2))  # fmt: skip
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
