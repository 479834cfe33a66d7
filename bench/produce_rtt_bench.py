"""What one Produce request costs the broker: round trips with one request in
flight, next to librdkafka's mock broker in a process of its own (issue #18).

The paced p99 of ``produce_tail_bench`` moves by milliseconds between runs on
a 2-core VM; this measure moves by a few microseconds, so it is the one to
optimise the per-request path against. A raw client (a blocking socket, no
librdkafka) sends the same Produce v9 frame again and again (acks=all, 4
partitions, each one lz4 batch of 27 records of 1 KiB: what the paced run's
producer sends at 20 MB/s) and times each response, against:

- ``tidelake serve`` with its data directory on disk (fsync'd WAL);
- ``tidelake serve`` with its data directory on tmpfs (``/dev/shm``): the
  same work with an fdatasync that costs nothing, so the gap between the two
  rows is the disk's share, and this row is the broker's own;
- ``tidelake serve`` on disk with the file WAL's Python writer thread
  (``storage.wal_writer = "python"``) instead of the C one, the default;
- the mock broker, run in a second process (``--serve-mock``) so that it
  pays the same cross-process wake-ups: what the client and the loopback
  cost.

Each row also gives the server process's CPU per request (the
scheduler's run time of all its threads over the timed requests, the
background uploads included):
on a shared VM the wall clock of one round trip moves by tens of percent
between rounds, the CPU a request costs by a few.

Alternating order in each round; prints medians of ``--rounds`` and writes
bench/results/produce_rtt.json. ``--sides tmpfs,mock`` runs a subset.

    python -m bench.produce_rtt_bench [--rounds 3] [--requests 3000]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import crc32c
import lz4.frame
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i32Timedelta

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.broker_bench import _create_topic  # noqa: E402
from ingest.protocol.codec import decode_response, encode_request  # noqa: E402
from ingest.protocol.records import BATCH_HEADER_SIZE, build_batch  # noqa: E402
from tests.integration.broker.rawkafka import RawClient  # noqa: E402
from tests.support.platform import TidelakeProcess  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
_TOPIC = "rtt"
_PARTITIONS = 4  # the mock's default for an auto-created topic
_LZ4 = 3


def lz4_batch(records: int, size: int) -> bytes:
    """A v2 batch of ``records`` values of ``size`` bytes, lz4-compressed as
    librdkafka sends it (the batch header is rewritten around the frame)."""
    value = os.urandom(size // 2).hex().encode()[:size]
    now = int(time.time() * 1000)
    plain = build_batch([(None, value, [], now)] * records)
    out = bytearray(plain[:BATCH_HEADER_SIZE]) + lz4.frame.compress(plain[BATCH_HEADER_SIZE:])
    struct.pack_into(">i", out, 8, len(out) - 12)  # batch length
    struct.pack_into(">h", out, 21, _LZ4)  # attributes
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def frames(count: int, records: int, size: int, partitions: int = _PARTITIONS) -> list[bytes]:
    batch = lz4_batch(records, size)
    request = ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(
            TopicProduceData(
                name=TopicName(_TOPIC),
                partition_data=tuple(
                    PartitionProduceData(index=i32(p), records=batch) for p in range(partitions)
                ),
            ),
        ),
    )
    return [encode_request(0, 9, i, "rtt-bench", request) for i in range(count)]


def _cpu_seconds(pid: int | None) -> float:
    """CPU a process has run so far, summed over its threads (0 without a
    pid): the scheduler's nanosecond run time (/proc/.../schedstat), where
    the clock-tick counts of /proc/.../stat are too coarse for 3,000 requests."""
    if pid is None:
        return 0.0
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):  # a thread that ended meanwhile
            continue
    return total / 1e9


def round_trips(
    bootstrap: str, requests: list[bytes], server_pid: int | None = None
) -> dict[str, float]:
    """Send each request once its predecessor's response came back; ms
    quantiles, and the server process's CPU per request (with ``server_pid``;
    steadier than the wall clock on a shared VM)."""
    times = []
    cpu_before = _cpu_seconds(server_pid)
    with RawClient(bootstrap, timeout=30) as c:
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for frame in requests:
            started = time.perf_counter()
            c.send_raw(frame)
            body = c.recv_frame()
            times.append((time.perf_counter() - started) * 1000)
            correlation_id, response = decode_response(0, 9, body)
            if correlation_id != struct.unpack(">i", frame[8:12])[0]:
                raise AssertionError("a response for another request")
            errors = {int(p.error_code) for t in response.responses for p in t.partition_responses}
            if errors != {0}:
                raise AssertionError(f"the broker answered with error codes {errors}")
    cpu_us = (_cpu_seconds(server_pid) - cpu_before) / len(requests) * 1e6
    times.sort()
    n = len(times)
    return {
        "server_cpu_us": cpu_us,
        "p50_ms": times[n // 2],
        "p90_ms": times[int(n * 0.9)],
        "p99_ms": times[int(n * 0.99)],
        "mean_ms": statistics.fmean(times),
    }


def serve_mock() -> None:
    """Host librdkafka's mock cluster here; print its address; serve until stdin closes."""
    from confluent_kafka import Producer

    p = Producer({"test.mock.num.brokers": 1, "bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    p.produce(_TOPIC, b"x")  # auto-creates the topic with 4 partitions
    p.flush(10)
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the directory listing's own descriptor, closed since
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = []
    for line in Path("/proc/self/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        if f[3] == "0A" and f[9] in inodes:  # listening, and ours
            ports.append(int(f[1].rsplit(":", 1)[1], 16))
    print(f"127.0.0.1:{ports[0]}", flush=True)
    sys.stdin.read()


def _tidelake(data: Path, requests: list[bytes], writer: str) -> dict[str, float]:
    env = {"TIDELAKE_LOG_LEVEL": "WARNING", "TIDELAKE_STORAGE_WAL_WRITER": writer}
    proc = TidelakeProcess(data, env=env).start()
    try:
        _create_topic(proc.bootstrap, _TOPIC, _PARTITIONS)
        round_trips(proc.bootstrap, requests[:300])  # warm up
        assert proc.proc is not None
        return round_trips(proc.bootstrap, requests, proc.proc.pid)
    finally:
        proc.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--records", type=int, default=27)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--sides", default="disk,disk-python-writer,tmpfs,mock")
    ap.add_argument("--serve-mock", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_mock:
        serve_mock()
        return 0
    requests = frames(args.requests, args.records, args.size)
    mock = subprocess.Popen(
        [sys.executable, "-m", "bench.produce_rtt_bench", "--serve-mock"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=str(Path(__file__).resolve().parents[1]),
    )
    assert mock.stdout is not None and mock.stdin is not None
    mock_address = mock.stdout.readline().strip()
    sides = tuple(args.sides.split(","))
    unknown = set(sides) - {"disk", "disk-python-writer", "tmpfs", "mock"}
    if unknown:
        ap.error(f"unknown sides {sorted(unknown)}")
    rounds: list[dict[str, object]] = []
    try:
        for r in range(args.rounds):
            row: dict[str, object] = {"round": r, "load_before": os.getloadavg()[0]}
            for side in sides if r % 2 == 0 else tuple(reversed(sides)):
                if side == "mock":
                    round_trips(mock_address, requests[:300])
                    row[side] = round_trips(mock_address, requests, mock.pid)
                    continue
                base = "/dev/shm" if side == "tmpfs" else None
                writer = "python" if side == "disk-python-writer" else "c"
                with tempfile.TemporaryDirectory(dir=base) as tmp:
                    row[side] = _tidelake(Path(tmp) / "data", requests, writer)
            rounds.append(row)
            print(
                f"round {r}: "
                + ", ".join(
                    f"{s} p50 {row[s]['p50_ms']:.3f} ms cpu {row[s]['server_cpu_us']:.0f} us"  # type: ignore[index]
                    for s in sides
                ),
                flush=True,
            )
    finally:
        mock.stdin.close()
        mock.wait(timeout=30)
    medians = {
        side: {
            q: statistics.median(row[side][q] for row in rounds)  # type: ignore[index]
            for q in ("p50_ms", "p90_ms", "p99_ms", "mean_ms", "server_cpu_us")
        }
        for side in sides
    }
    print(f"\none Produce in flight ({args.requests} requests, medians of {args.rounds} rounds)")
    print(f"{'':34s}{'p50 ms':>10s}{'p90 ms':>10s}{'p99 ms':>10s}{'server CPU us/req':>19s}")
    names = {
        "disk": "tidelake, disk",
        "disk-python-writer": "tidelake, disk, Python WAL writer",
        "tmpfs": "tidelake, tmpfs",
        "mock": "mock broker",
    }
    for side in sides:
        m = medians[side]
        print(
            f"{names[side]:34s}{m['p50_ms']:>10.3f}{m['p90_ms']:>10.3f}{m['p99_ms']:>10.3f}"
            f"{m['server_cpu_us']:>19.0f}"
        )
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "produce_rtt.json"
    result = {
        "benchmark": "produce_rtt",
        "machine_cores": os.cpu_count(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": vars(args),
        "rounds": rounds,
        "medians": medians,
    }
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
