"""S3Stream on moto's S3 server: catch-up reads, object counts, produce p99 under load.

Usage::

    python bench/s3stream_bench.py [--mib 128] [--seconds 5] [--rounds 7] [--ahead 0,4]

Starts ``moto_server`` on 127.0.0.1 and measures, in the same run:

- ``raw-get``: whole-object GETs of the engine's own 8 MiB objects through
  the same S3 object store, one at a time and four at a time (the baseline),
  and four at a time through boto3's ``get_object`` (the store's GETs go
  straight over http.client; this row shows what that is worth);
- ``catch-up``: a fresh engine (cold block cache) reads the stream back from
  the beginning with 1 MiB fetches, without read-ahead and with the default
  (4 ranges: up to 5 GETs in flight); ratios against both raw GET figures of
  the same round (raw GETs run before and after the reads; a ratio is to
  their mean). Raw GETs and catch-up reads alternate over ``--rounds``
  rounds (default 7) after one untimed warm-up read; the table shows medians
  of the throughputs and of the per-round ratios, with their ranges (the
  JSON has every round's ratio);
- ``objects``: many small uploads (4 streams, 256 KiB uploads), then
  compaction to completion: object count and PUTs per GB before and after;
- ``wal``: append latency at 20 MB/s, file WAL vs object WAL (5 and 20 ms
  batches), and PUTs per GB including WAL objects;
- ``produce-p99``: 16 KiB appends at 20 MB/s (file WAL) idle, then while a
  cold catch-up read and a compaction run in the same process; idle and
  loaded windows alternate (``--produce-rounds`` pairs, default 5), with
  the broker's runtime settings (``ingest.runtime.tune_for_latency``). Run with the engine's default cap on
  limited traffic while produce is active (``network_busy_bytes_per_second``,
  100 MB/s) and with no cap.

moto keeps its objects on a tmpfs (``/dev/shm``) where there is one, off the
WAL's disk (see ``_start_moto``).

Prints a table and writes JSON to ``bench/results/s3stream_bench.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import boto3  # noqa: E402

from ingest.metadata import SqliteMetadataStore  # noqa: E402
from ingest.runtime import tune_for_latency  # noqa: E402
from ingest.s3stream import S3StreamConfig, S3StreamEngine, open_engine  # noqa: E402
from ingest.s3stream.objectstore import ObjectStore, open_object_store  # noqa: E402

MIB = 1 << 20
BUCKET = "bench"


class CountingStore:
    """Counts PUTs and GETs of an object store."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.puts = 0
        self.gets = 0
        self.put_bytes = 0

    async def put(
        self, key: str, data: bytes | bytearray | memoryview, *, if_absent: bool = False
    ) -> None:
        self.puts += 1
        self.put_bytes += len(data)
        await self.inner.put(key, data, if_absent=if_absent)

    async def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        self.gets += 1
        return await self.inner.get(key, start, end)

    async def get_then(self, key: str, start: Any, end: Any, then: Any) -> Any:
        self.gets += 1
        return await self.inner.get_then(key, start, end, then)

    async def delete(self, keys: list[str]) -> None:
        await self.inner.delete(keys)

    async def list(self, prefix: str = "") -> Any:
        return await self.inner.list(prefix)

    async def close(self) -> None:
        await self.inner.close()


def _cpu_times() -> list[int]:
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


def _steal_since(before: list[int]) -> float:
    """The share of CPU time the hypervisor took since ``before`` (0 off VMs)."""
    d = [b - a for a, b in zip(before, _cpu_times(), strict=False)]
    return d[7] / max(sum(d), 1) if len(d) > 7 else 0.0


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds of this process and of the S3 server over a stretch."""

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self._t = (time.process_time(), _proc_cpu(server_pid))

    def since(self) -> tuple[float, float]:
        return time.process_time() - self._t[0], _proc_cpu(self.server_pid) - self._t[1]


def _start_moto() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test")
    # moto spools every object over 5 MiB to a temporary file. On the WAL's
    # disk, writing those back competes with the WAL's fsyncs (measured here:
    # another file's 64 MiB write and fsync stalls an fdatasync for 30-40 ms):
    # a cost of running S3 on the broker's machine, which no real object store
    # puts on the broker's disk. Keep them in memory where there is a tmpfs.
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        env["TMPDIR"] = "/dev/shm"
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    ).create_bucket(Bucket=BUCKET)
    return proc, url


class Env:
    def __init__(self, endpoint: str, base: Path, server_pid: int) -> None:
        self.endpoint = endpoint
        self.base = base
        self.server_pid = server_pid

    def cpu(self) -> CpuMeter:
        return CpuMeter(self.server_pid)

    def store(self, prefix: str, **options: Any) -> CountingStore:
        return CountingStore(
            open_object_store(
                f"s3://{BUCKET}/{prefix}",
                endpoint_url=self.endpoint,
                region="us-east-1",
                access_key_id="test",
                secret_access_key="test",
                path_style=True,
                **options,
            )
        )

    async def engine(
        self, name: str, store: CountingStore, **kw: Any
    ) -> tuple[S3StreamEngine, SqliteMetadataStore]:
        d = self.base / name
        d.mkdir(exist_ok=True)
        metadata = SqliteMetadataStore(d / "meta.db")
        config = S3StreamConfig(wal_dir=d / "wal", **kw)
        engine = open_engine(config, metadata, store)
        await engine.start()
        return engine, metadata


async def _write(engine: S3StreamEngine, mib: int, batch: int = 64 * 1024) -> int:
    s = await engine.create_stream()
    payload = os.urandom(batch)
    window: list[Any] = []
    for _ in range(mib * MIB // batch):
        window.append(s.append(payload, 10))
        if len(window) >= 64:
            await window.pop(0)
    for f in window:
        await f
    return s.stream_id


async def _read_all(engine: S3StreamEngine, sid: int) -> tuple[int, float]:
    s = await engine.open_stream(sid)
    t = time.perf_counter()
    pos, read = 0, 0
    while pos < s.confirm_offset:
        batches = await s.fetch(pos, s.confirm_offset, MIB)
        read += sum(len(b.payload) for b in batches)
        pos = batches[-1].end_offset
    return read, time.perf_counter() - t


async def catch_up(
    env: Env, mib: int, rounds: int = 7, aheads: tuple[int, ...] = (0, 4)
) -> list[dict[str, Any]]:
    """Raw GETs and cold catch-up reads of the same objects, interleaved over
    ``rounds`` rounds (moto's speed drifts by a third between runs). MB/s are
    medians with the range seen; a ratio is the median of each round's ratio
    to the raw GETs of that round. One untimed catch-up read first warms the
    process as a running broker is warm (the store's read buffers and
    connections); each timed one still starts from an empty block cache."""
    prefix = uuid.uuid4().hex
    store = env.store(prefix)
    # the same GETs through boto3's get_object, for comparison
    boto_store = env.store(prefix, direct_get=False)
    engine, metadata = await env.engine("catchup", store, upload_size_bytes=8 * MIB)
    sid = await _write(engine, mib)
    await engine.close()
    objs = metadata.list_objects()
    runs: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    await boto_store.get(objs[0].key, 0, 1024)
    engine, _ = await env.engine("catchup", store, block_cache_bytes=128 * MIB)
    await _read_all(engine, sid)  # warm-up
    await engine.close()

    # CPU ms per GB read, of this process and of moto: the two share the
    # machine's cores, so CPU either spends per GB comes out of throughput
    cpu: dict[str, list[tuple[float, float]]] = {}

    def account(name: str, meter: CpuMeter, nbytes: int) -> None:
        ours, server = meter.since()
        cpu.setdefault(name, []).append((ours * 1e12 / nbytes, server * 1e12 / nbytes))

    async def raw(s: CountingStore, conc: int, name: str) -> float:
        sem = asyncio.Semaphore(conc)

        async def get(key: str) -> int:
            async with sem:
                return len(await s.get(key))

        meter = env.cpu()
        t = time.perf_counter()
        n = sum(await asyncio.gather(*(get(o.key) for o in objs)))
        dt = time.perf_counter() - t
        account(name, meter, n)
        return n / dt / 1e6

    for _ in range(rounds):
        this: dict[str, float] = {}
        x1, x4 = await raw(store, 1, "raw-get x1"), await raw(store, 4, "raw-get x4")
        name = "raw-get x4, boto3 get_object"
        this[name] = await raw(boto_store, 4, name)
        reads: dict[str, float] = {}
        for ahead in aheads:
            engine, _ = await env.engine(
                "catchup", store, read_ahead_ranges=ahead, block_cache_bytes=128 * MIB
            )
            name = f"catch-up ahead={ahead}"
            meter = env.cpu()
            read, dt = await _read_all(engine, sid)
            account(name, meter, read)
            await engine.close()
            reads[name] = read / dt / 1e6
        # the raw GETs again after the reads: each ratio is to the mean of the
        # raw figures on either side of it, so drift within a round cancels
        this["raw-get x1"] = (x1 + await raw(store, 1, "raw-get x1")) / 2
        this["raw-get x4"] = (x4 + await raw(store, 4, "raw-get x4")) / 2
        for name, mbs in reads.items():
            this[name] = mbs
            for base in ("raw-get x1", "raw-get x4"):
                ratios.setdefault(f"{name} vs {base}", []).append(mbs / this[base])
        for k, x in this.items():
            runs.setdefault(k, []).append(x)
    metadata.close()
    await boto_store.close()
    out: list[dict[str, Any]] = []
    for k in sorted(runs, key=lambda k: (not k.startswith("raw"), k != "raw-get x1", k)):
        v = runs[k]
        row: dict[str, Any] = {
            "scenario": k,
            "MB/s": round(statistics.median(v), 1),
            "range": f"{min(v):.0f}-{max(v):.0f}",
        }
        row["CPU ms/GB ours"] = round(statistics.median(c[0] for c in cpu[k]))
        row["CPU ms/GB moto"] = round(statistics.median(c[1] for c in cpu[k]))
        if k.startswith("raw"):
            row["objects"] = len(objs)
        else:
            for base in ("raw-get x1", "raw-get x4"):
                r = ratios[f"{k} vs {base}"]
                row[f"vs {base[8:]}"] = f"{statistics.median(r):.0%} ({min(r):.0%}-{max(r):.0%})"
                row[f"rounds vs {base[8:]}"] = [round(x, 3) for x in r]
        out.append(row)
    return out


async def objects(env: Env, mib: int) -> list[dict[str, Any]]:
    """Small uploads (256 KiB, as a slow writer's interval-driven uploads
    make) from four streams, then compaction to completion."""
    store = env.store(uuid.uuid4().hex)
    engine, metadata = await env.engine(
        "objects",
        store,
        upload_size_bytes=256 * 1024,
        upload_interval_ms=50,
        compaction_interval_ms=10**9,
        stream_object_bytes=4 * MIB,
        compaction_small_bytes=4 * MIB,
        compaction_target_bytes=32 * MIB,
    )
    streams = [await engine.create_stream() for _ in range(4)]
    payload = os.urandom(16 * 1024)
    total = mib * MIB
    written = 0
    while written < total:
        await asyncio.gather(*(s.append(payload, 1) for s in streams))
        written += 4 * len(payload)
    await engine.flush()
    before = len(metadata.list_objects())
    puts_before = store.puts
    t = time.perf_counter()
    while await engine.compact():
        pass
    compact_s = time.perf_counter() - t
    after = len(metadata.list_objects())
    listed = len(await store.list("streams/"))
    await engine.close()
    metadata.close()
    gb = written / 1e9
    return [
        {
            "scenario": "objects small uploads",
            "MiB": mib,
            "objects": before,
            "PUTs/GB": round(puts_before / gb),
        },
        {
            "scenario": "objects after compaction",
            "MiB": mib,
            "objects": after,
            "in store": listed,
            "PUTs/GB": round(store.puts / gb),
            "compact s": round(compact_s, 1),
        },
    ]


async def _paced(engine: S3StreamEngine, seconds: float, rate: float) -> list[float]:
    streams = [await engine.create_stream() for _ in range(4)]
    payload = os.urandom(16 * 1024)
    interval = len(payload) / rate
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
        delay = start + n * interval - time.perf_counter()
        await asyncio.sleep(max(delay, 0))
    await asyncio.gather(*tasks)
    return sorted(lat)


def _pct(lat: list[float], p: float) -> float:
    return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3, 2)


async def produce_under_load(
    env: Env, mib: int, seconds: float, busy: int, rounds: int = 5
) -> list[dict[str, Any]]:
    """Idle and loaded windows alternate (``rounds`` pairs of ``seconds`` each), so slow
    drift of the shared disk and CPU hits both sides alike; percentiles are over all
    windows of a side."""
    store = env.store(uuid.uuid4().hex)
    name = f"load-{busy}"
    # history to catch up on, and small objects to compact
    engine, metadata = await env.engine(name, store, upload_size_bytes=8 * MIB)
    sid = await _write(engine, mib)
    await engine.close()
    engine, metadata = await env.engine(
        name, store, compaction_interval_ms=10**9, network_busy_bytes_per_second=busy
    )
    idle: list[float] = []
    loaded: list[float] = []
    read_bytes = [0]
    compactions = [0]
    for _ in range(rounds):
        small = [await engine.create_stream() for _ in range(4)]
        for _ in range(20):
            for s in small:
                await s.append(os.urandom(64 * 1024), 1)
            await engine.flush()
        idle += await _paced(engine, seconds, 20e6)
        stop = asyncio.Event()

        async def reader(stop: asyncio.Event = stop) -> None:
            s = await engine.open_stream(sid)
            while not stop.is_set():
                engine.block_cache.clear()  # cold, every round
                pos = 0
                while pos < s.confirm_offset and not stop.is_set():
                    batches = await s.fetch(pos, s.confirm_offset, MIB)
                    read_bytes[0] += sum(len(b.payload) for b in batches)
                    pos = batches[-1].end_offset

        async def compactor(stop: asyncio.Event = stop) -> None:
            while not stop.is_set():
                n = await engine.compact()
                compactions[0] += n
                if not n:
                    await asyncio.sleep(0.5)

        bg = [asyncio.create_task(reader()), asyncio.create_task(compactor())]
        loaded += await _paced(engine, seconds, 20e6)
        stop.set()
        await asyncio.gather(*bg)
    await engine.close()
    metadata.close()
    idle.sort()
    loaded.sort()
    tag = f"busy cap {busy / 1e6:.0f} MB/s" if busy else "no cap"
    return [
        {
            "scenario": f"produce idle ({tag})",
            "p50 ms": _pct(idle, 0.5),
            "p99 ms": _pct(idle, 0.99),
        },
        {
            "scenario": "  + catch-up + compaction",
            "read MB/s": round(read_bytes[0] / (seconds * rounds) / 1e6, 1),
            "compactions": compactions[0],
            "p50 ms": _pct(loaded, 0.5),
            "p99 ms": _pct(loaded, 0.99),
            "p99 ratio": round(_pct(loaded, 0.99) / max(_pct(idle, 0.99), 0.01), 2),
        },
    ]


async def wal_latency(env: Env, seconds: float) -> list[dict[str, Any]]:
    """Append latency at 20 MB/s (16 KiB appends): file WAL vs object WAL on moto."""
    out = []
    for kind, interval in (("file", 0.0), ("object", 5.0), ("object", 20.0)):
        store = env.store(uuid.uuid4().hex)
        engine, metadata = await env.engine(
            f"wal-{kind}-{interval}", store, wal_kind=kind, wal_batch_interval_ms=interval
        )
        puts = store.puts
        lat = await _paced(engine, seconds, 20e6)
        wal_puts = engine._wal.puts if kind == "object" else 0  # type: ignore[attr-defined]
        await engine.close()
        metadata.close()
        out.append(
            {
                "scenario": f"append {kind} WAL"
                + (f" {interval:g} ms" if kind == "object" else ""),
                "p50 ms": _pct(lat, 0.5),
                "p99 ms": _pct(lat, 0.99),
                "WAL PUTs/s": round(wal_puts / seconds),
                "PUTs/GB": round((store.puts - puts) / (20e6 * seconds / 1e9)),
            }
        )
    return out


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--only", default="catch-up,objects,wal,produce")
    ap.add_argument(
        "--rounds", type=int, default=7, help="catch-up: rounds of raw and catch-up reads"
    )
    ap.add_argument(
        "--ahead",
        default=f"0,{S3StreamConfig().read_ahead_ranges}",
        help="catch-up: read_ahead_ranges values to run (default: none and the default)",
    )
    ap.add_argument(
        "--produce-rounds",
        type=int,
        default=5,
        help="produce-p99: pairs of idle and loaded windows (--seconds each)",
    )
    ap.add_argument(
        "--busy-mbs",
        type=int,
        default=S3StreamConfig().network_busy_bytes_per_second // 1_000_000,
        help="network_busy_bytes_per_second of the capped run (default: the engine's default)",
    )
    args = ap.parse_args()
    proc, endpoint = _start_moto()
    base = Path(tempfile.mkdtemp(prefix="s3stream-bench-"))
    env = Env(endpoint, base, proc.pid)
    results: list[dict[str, Any]] = []
    loads: list[float] = []
    tune_for_latency()  # the broker's interpreter settings
    steal: list[float] = []
    try:
        only = set(args.only.split(","))
        if "catch-up" in only:
            aheads = tuple(int(a) for a in args.ahead.split(","))
            t = _cpu_times()
            results += await catch_up(env, args.mib, args.rounds, aheads)
            loads.append(os.getloadavg()[0])
            steal.append(_steal_since(t))
        if "objects" in only:
            t = _cpu_times()
            results += await objects(env, min(args.mib, 64))
            loads.append(os.getloadavg()[0])
            steal.append(_steal_since(t))
        if "wal" in only:
            t = _cpu_times()
            results += await wal_latency(env, args.seconds)
            loads.append(os.getloadavg()[0])
            steal.append(_steal_since(t))
        if "produce" in only:
            for busy in (args.busy_mbs * 1_000_000, 0):
                t = _cpu_times()
                results += await produce_under_load(
                    env, min(args.mib, 64), args.seconds, busy, args.produce_rounds
                )
                loads.append(os.getloadavg()[0])
                steal.append(_steal_since(t))
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(base, ignore_errors=True)
    keys: list[str] = []
    for r in results:
        keys += [k for k in r if k != "scenario" and k not in keys and not k.startswith("rounds")]
    print(f"{'scenario':<34}" + "".join(f"{k:>18}" for k in keys))
    for r in results:
        print(f"{r['scenario']:<34}" + "".join(f"{str(r.get(k, '')):>18}" for k in keys))
    print(f"load average (1 min) after each part: {loads} on {os.cpu_count()} cores")
    # CPU time taken by the hypervisor: on a shared VM it swings from ~0 to
    # half the machine, and figures from a part with much steal are not
    # comparable with others
    print("CPU steal during each part: " + ", ".join(f"{x:.0%}" for x in steal))
    out = Path(__file__).with_name("results") / "s3stream_bench.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps({"load_average": loads, "steal": steal, "results": results}, indent=2)
    )


if __name__ == "__main__":
    asyncio.run(main())
