"""A Produce request's bytes from frame to the log's payload: kio's reader and
three copies (session 12) against the in-frame reader and one copy (now).

    python -m bench.produce_path_bench [--rounds 5]

Both paths run in the same process on the same frames, for a request like the
paced latency bench's (4 partitions of about 7 KiB) and a throughput-sized one
(4 partitions of 256 KiB):

- before: ``bytes(frame slice)`` in the connection, kio's generic reader
  (which copies each ``records``), ``bytearray(records)`` in the partition,
  the base offset patched in place, ``bytes(...)`` in the stream;
- now: the connection's copy out of its read buffer for a frame that fits one
  read (a larger frame is read straight into its own buffer: no copy),
  ``read_produce_request`` (records are views of the frame), ``stamp_batches``
  (the log's copy, offsets written as it goes).

The per-record CRC and validation work is the same on both paths and is not
timed. Prints microseconds per request (median of ``--rounds``) and writes
``bench/results/produce_path_bench.json``.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kio.schema.produce.v9.request import (  # noqa: E402
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kio.schema.types import TopicName  # noqa: E402
from kio.static.primitive import Records, i16, i32, i32Timedelta  # noqa: E402

from ingest.protocol.codec import (  # noqa: E402
    _reader,
    _writer,
    check_request,
    decode_request,
    parse_request_header,
)
from ingest.protocol.records import (  # noqa: E402
    build_batch,
    patch_base_offset,
    split_batches,
    stamp_batches,
)
from ingest.server.connection import _SCRATCH_BYTES  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def _frame(partitions: int, batch_bytes: int) -> bytes:
    value = os.urandom(512).hex().encode()  # 1 KiB values
    per_batch = max(1, batch_bytes // (len(value) + 20))
    batch = build_batch([(None, value, [], 1_700_000_000_000 + i) for i in range(per_batch)])
    req = ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(
            TopicProduceData(
                name=TopicName("bench"),
                partition_data=tuple(
                    PartitionProduceData(index=i32(i), records=Records(batch))
                    for i in range(partitions)
                ),
            ),
        ),
    )
    buf = io.BytesIO()
    buf.write(b"\x00\x00\x00\x09\x00\x00\x00\x01\x00\x05bench\x00")  # Produce v9 header
    _writer(ProduceRequest)(buf, req)
    return buf.getvalue()


def _before(data: bytes) -> list[bytes]:
    frame = memoryview(bytes(memoryview(data)[0:]))  # the connection's copy
    header = parse_request_header(frame)
    body, offset = check_request(header, frame)
    req = _reader(ProduceRequest)(body, offset)
    req = req[0] if isinstance(req, tuple) else req
    out = []
    for t in req.topic_data:
        for p in t.partition_data:
            buf = bytearray(p.records)  # the partition's copy
            view = memoryview(buf)
            offset = 1000
            for h in split_batches(view, verify_crc=False):
                patch_base_offset(view, h.position, offset, 7)
                offset += h.count
            del view
            out.append(bytes(buf))  # the stream's copy
    return out


def _now(data: bytes) -> list[bytes]:
    # a frame that fits the connection's read buffer is copied out of it
    frame = memoryview(bytes(data) if len(data) <= _SCRATCH_BYTES else data)
    req = decode_request(parse_request_header(frame), frame)
    out = []
    for t in req.topic_data:
        for p in t.partition_data:
            view = memoryview(p.records)
            out.append(stamp_batches(view, split_batches(view, verify_crc=False), 1000, 7))
    return out


def _per_request_us(fn: Any, data: bytes, seconds: float = 1.0) -> float:
    n = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(20):
            fn(data)
        n += 20
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    cases = {"4 x 7 KiB": _frame(4, 7 * 1024), "4 x 256 KiB": _frame(4, 256 * 1024)}
    rows = []
    for name, data in cases.items():
        assert _before(data) == _now(data)  # the same payloads, byte for byte
        before = [_per_request_us(_before, data) for _ in range(args.rounds)]
        now = [_per_request_us(_now, data) for _ in range(args.rounds)]
        rows.append(
            {
                "request": name,
                "bytes": len(data),
                "before_us": statistics.median(before),
                "now_us": statistics.median(now),
                "rounds_before_us": before,
                "rounds_now_us": now,
            }
        )
    print(f"{'request':14s} {'bytes':>9s} {'before us':>10s} {'now us':>8s} {'saved':>7s}")
    for r in rows:
        saved = 1 - r["now_us"] / r["before_us"]
        print(
            f"{r['request']:14s} {r['bytes']:9,d} {r['before_us']:10.1f} "
            f"{r['now_us']:8.1f} {saved:7.0%}"
        )
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "produce_path_bench.json"
    out.write_text(json.dumps({"rows": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
