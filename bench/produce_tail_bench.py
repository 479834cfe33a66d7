"""Where the paced produce p99 goes: the client's latency next to the broker's
own stage histograms and what else held the machine's CPUs (issue #18).

Each round drives ``tidelake serve`` (fsync'd file WAL on the data directory's
disk) at a fixed rate with the produce_peer_bench settings (1 KiB, acks=all,
lz4, idempotent, linger 1 ms, 4 partitions), a second ``tidelake serve`` with
one setting changed (``--peer``: ``unpaced-objects``, the default, writes its
local objects in one go before their fsync, ``storage.file_object_writeback_bytes
= 0``; ``python-writer`` commits its file WAL on the Python writer thread,
``storage.wal_writer = "python"``), and librdkafka's in-memory mock broker with
the same producer, rotating which goes first. Around each
Tidelake run it scrapes ``/metrics`` and reads the deltas of:

- ``tidelake_kafka_request_seconds{api="produce"}``: frame decoded to response;
- ``tidelake_storage_wal_append_seconds``: append to durable, on the loop;
- ``tidelake_storage_wal_sync_seconds``: one group commit's writev + fdatasync;
- ``tidelake_event_loop_lag_seconds``: how late the loop ran a 10 ms timer;

and from ``/proc`` the CPU the broker, the producing process and kernel
threads that run in bursts (``kdamond``, DAMON's memory monitor, where the
kernel runs one) took. Histogram quantiles are bucket upper bounds ("<=").
Prints a table of medians and writes bench/results/produce_tail.json.

    python -m bench.produce_tail_bench [--rounds 3] [--seconds 10] [--rate-mb 20]
        [--peer unpaced-objects|python-writer|objects-tmpfs|tmpfs|recycled-wal|no-prefill|serial-sync|loop-pinned]
        [--payload text|random] [--probe-seconds 10]

Before the rounds, ``bench/_wakeup.py`` measures how often each CPU wakes a
sleeping thread more than 2 ms late (the host's floor under the p99).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._wakeup import late_wakeups  # noqa: E402
from bench.broker_bench import _create_topic, produce_latency  # noqa: E402
from tests.support.platform import TidelakeProcess  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
_MOCK = {"test.mock.num.brokers": 1}
_TICK = os.sysconf("SC_CLK_TCK")
_STAGES = {
    "request": ("tidelake_kafka_request_seconds", {"api": "produce"}),
    "wal_append": ("tidelake_storage_wal_append_seconds", {}),
    "wal_sync": ("tidelake_storage_wal_sync_seconds", {}),
    "loop_lag": ("tidelake_event_loop_lag_seconds", {}),
}
Buckets = dict[float, float]
# the second broker: its label and the one setting it changes
_PEERS = {
    "unpaced-objects": ("objects unpaced", {"TIDELAKE_STORAGE_FILE_OBJECT_WRITEBACK_BYTES": "0"}),
    "python-writer": ("Python WAL writer", {"TIDELAKE_STORAGE_WAL_WRITER": "python"}),
    # where the disk's share of the tail is: local objects (the embedded
    # default's object store) on tmpfs, the WAL still on disk; or all of the
    # data directory on tmpfs (fdatasync costs nothing)
    "objects-tmpfs": ("objects on tmpfs", {}),
    "tmpfs": ("all on tmpfs", {}),
    # a broker past its first segments: its WAL writes into a recycled
    # segment (written before, so an fdatasync changes no file size)
    "recycled-wal": ("recycled WAL segment", {}),
    # without the file WAL's prefill: every record's fdatasync in a new
    # segment also commits the file's new size
    "no-prefill": ("WAL prefill off", {"TIDELAKE_STORAGE_WAL_PREFILL_BYTES": "0"}),
    # one group commit at a time (the C writer's sync depth 1) instead of two
    "serial-sync": ("WAL sync depth 1", {"TIDELAKE_STORAGE_WAL_SYNC_DEPTH": "1"}),
    # the same broker, its event-loop thread pinned (sched_setaffinity) to
    # the CPU that woke a sleeping thread late least often in the probe run
    # before the rounds: how much of the tail is the host's late wake-ups
    "loop-pinned": ("loop on quietest CPU", {}),
}
_SHM = Path("/dev/shm")


def _buckets(text: str) -> dict[str, Buckets]:
    out: dict[str, Buckets] = {}
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for stage, (name, labels) in _STAGES.items():
        got: Buckets = {}
        family = families.get(name)
        for s in family.samples if family is not None else ():
            if s.name == f"{name}_bucket" and all(s.labels.get(k) == v for k, v in labels.items()):
                got[float(s.labels["le"])] = got.get(float(s.labels["le"]), 0.0) + s.value
        out[stage] = got
    return out


def _quantile(before: Buckets, after: Buckets, q: float) -> tuple[float, int]:
    """(upper bound in ms of the bucket holding quantile q, observations)."""
    bounds = sorted(after)
    delta = [after[b] - before.get(b, 0.0) for b in bounds]
    n = int(delta[-1]) if delta else 0
    if n == 0:
        return 0.0, 0
    for b, acc in zip(bounds, delta, strict=True):
        if acc >= q * n:
            return b * 1000, n
    return float("inf"), n


def _proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _kernel_bursters() -> dict[int, str]:
    """Kernel threads that take the CPU in bursts: DAMON's monitors."""
    found: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                comm = (d / "comm").read_text().strip()
            except OSError:
                continue
            if comm.startswith("kdamond"):
                found[int(d.name)] = comm
    return found


def _kernel_cpu_ms(pids: dict[int, str]) -> float:
    total = 0.0
    for pid in pids:
        try:
            total += _proc_cpu_s(pid) * 1000
        except OSError:
            pass
    return total


def _tidelake_round(proc: TidelakeProcess, topic: str, args: argparse.Namespace) -> dict[str, object]:
    bursters = _kernel_bursters()
    before = _buckets(httpx.get(f"{proc.http_url}/metrics", timeout=30).text)
    assert proc.proc is not None
    broker0, client0, kernel0, t0 = (
        _proc_cpu_s(proc.proc.pid), _proc_cpu_s(os.getpid()), _kernel_cpu_ms(bursters), time.time()
    )  # fmt: skip
    client = produce_latency(
        proc.bootstrap, topic, args.rate_mb, args.seconds, args.size,
        distinct=args.payload == "random",
    )
    elapsed = time.time() - t0
    after = _buckets(httpx.get(f"{proc.http_url}/metrics", timeout=30).text)
    row: dict[str, object] = {
        "client": client,
        "broker_cores": (_proc_cpu_s(proc.proc.pid) - broker0) / elapsed,
        "client_cores": (_proc_cpu_s(os.getpid()) - client0) / elapsed,
        "kdamond_ms_per_s": (_kernel_cpu_ms(bursters) - kernel0) / elapsed,
        "kdamond_threads": len(bursters),
    }
    for stage in _STAGES:
        p50, n = _quantile(before[stage], after[stage], 0.5)
        p99, _ = _quantile(before[stage], after[stage], 0.99)
        p999, _ = _quantile(before[stage], after[stage], 0.999)
        row[stage] = {"n": n, "p50_le_ms": p50, "p99_le_ms": p99, "p999_le_ms": p999}
    return row


def _spare_segment(wal_dir: Path, size: int = 64 << 20) -> None:
    """A written, synced segment-sized spare, as a trim leaves one."""
    wal_dir.mkdir(parents=True)
    with open(wal_dir / f"{1:020d}.free", "wb") as f:
        chunk = bytes(1 << 20)
        for _ in range(size >> 20):
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate-mb", type=float, default=20.0)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--peer", choices=sorted(_PEERS), default="unpaced-objects")
    ap.add_argument(
        "--payload", choices=("text", "random"), default="text",
        help="text: one payload for every message, as produce_peer_bench (lz4 shrinks it "
        "about 25x); random: each message its own random bytes (the disk sees the full rate)",
    )
    ap.add_argument("--probe-seconds", type=float, default=10.0)
    args = ap.parse_args()
    peer_label, peer_env = _PEERS[args.peer]
    # the host's own floor, before anything of ours runs
    wakeups = late_wakeups(args.probe_seconds)
    quietest = min(wakeups, key=lambda w: (w["late_per_s"], w["late_ms_per_s"]))["cpu"]
    rounds: list[dict[str, object]] = []
    sides = ("tidelake", "tidelake_peer", "mock")
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory(dir=_SHM) as shm:
        if args.peer == "objects-tmpfs":
            peer_env = {"TIDELAKE_OBJECT_STORE_URL": f"file://{shm}/objects"}
        peer_dir = Path(shm if args.peer == "tmpfs" else tmp) / "tidelake_peer"
        if args.peer == "recycled-wal":
            _spare_segment(peer_dir / "wal")
        procs = {
            side: TidelakeProcess(
                data_dir, env={"TIDELAKE_LOG_LEVEL": "WARNING", **env}
            ).start()
            for side, data_dir, env in (
                ("tidelake", Path(tmp) / "tidelake", {}),
                ("tidelake_peer", peer_dir, peer_env),
            )
        }
        if args.peer == "loop-pinned":
            popen = procs["tidelake_peer"].proc
            assert popen is not None
            # the process's main thread is its event loop; its other threads keep their CPUs
            os.sched_setaffinity(popen.pid, {int(quietest)})
            peer_label = f"loop on CPU {int(quietest)}"
        try:
            for r in range(args.rounds):
                topic = f"tail-{r}"
                for proc in procs.values():
                    _create_topic(proc.bootstrap, topic, 4)
                row: dict[str, object] = {"round": r, "load_before": os.getloadavg()[0]}
                for side in sides[r % 3 :] + sides[: r % 3]:
                    if side in procs:
                        row[side] = _tidelake_round(procs[side], topic, args)
                    else:
                        row["mock"] = produce_latency(
                            "127.0.0.1:1", topic, args.rate_mb, args.seconds, args.size, _MOCK,
                            distinct=args.payload == "random",
                        )
                rounds.append(row)
                t, py, m = row["tidelake"], row["tidelake_peer"], row["mock"]
                assert isinstance(t, dict) and isinstance(py, dict) and isinstance(m, dict)
                print(
                    f"round {r}: tidelake p99 {t['client']['p99_ms']:.2f} ms "
                    f"(request p99 <= {t['request']['p99_le_ms']:g}, loop lag p99 <= "
                    f"{t['loop_lag']['p99_le_ms']:g}) | {peer_label} p99 "
                    f"{py['client']['p99_ms']:.2f} ms | mock p99 {m['p99_ms']:.2f} ms | "
                    f"kdamond {t['kdamond_ms_per_s']:.1f} ms/s",
                    flush=True,
                )
        finally:
            for proc in procs.values():
                proc.stop()

    def med(*path: str) -> float:
        values = []
        for row in rounds:
            v: object = row
            for k in path:
                assert isinstance(v, dict)
                v = v[k]
            assert isinstance(v, int | float)
            values.append(float(v))
        return statistics.median(values)

    summary: dict[str, float] = {
        "tidelake_p50_ms": med("tidelake", "client", "p50_ms"),
        "tidelake_p99_ms": med("tidelake", "client", "p99_ms"),
        "peer_p50_ms": med("tidelake_peer", "client", "p50_ms"),
        "peer_p99_ms": med("tidelake_peer", "client", "p99_ms"),
        "mock_p50_ms": med("mock", "p50_ms"),
        "mock_p99_ms": med("mock", "p99_ms"),
        "broker_cores": med("tidelake", "broker_cores"),
        "client_cores": med("tidelake", "client_cores"),
        "kdamond_ms_per_s": med("tidelake", "kdamond_ms_per_s"),
    }
    for stage in _STAGES:
        for q in ("p50_le_ms", "p99_le_ms", "p999_le_ms"):
            summary[f"{stage}_{q}"] = med("tidelake", stage, q)
            summary[f"peer_{stage}_{q}"] = med("tidelake_peer", stage, q)
    result = {
        "benchmark": "produce_tail",
        "machine_cores": os.cpu_count(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": vars(args),
        "peer": {"name": args.peer, "label": peer_label, "env": peer_env},
        "late_wakeups": wakeups,
        "rounds": rounds,
        "medians": summary,
        "targets": {"tidelake_p99_ms": 3.0},
    }
    print()
    print(f"host, before the rounds ({args.probe_seconds:g} s): wake-ups of a 0.5 ms sleep > 2 ms late")
    for w in wakeups:
        print(
            f"  CPU {int(w['cpu'])}: {w['late_per_s']:.1f}/s, latest {w['late_max_ms']:.1f} ms, "
            f"{w['late_ms_per_s']:.1f} ms lost per s"
        )
    print(f"medians of {args.rounds} rounds at {args.rate_mb:g} MB/s        p50 ms    p99 ms  p99.9 ms")
    print(f"client, tidelake                      {summary['tidelake_p50_ms']:>8.2f}  {summary['tidelake_p99_ms']:>8.2f}")
    print(f"client, tidelake, {peer_label:<19} {summary['peer_p50_ms']:>8.2f}  {summary['peer_p99_ms']:>8.2f}")
    print(f"client, mock broker                   {summary['mock_p50_ms']:>8.2f}  {summary['mock_p99_ms']:>8.2f}")
    names = {
        "request": "broker: produce request (<=)",
        "wal_append": "broker: WAL append to durable (<=)",
        "wal_sync": "broker: WAL writev+fdatasync (<=)",
        "loop_lag": "broker: event loop lag (<=)",
    }
    for prefix, side in (("", "tidelake"), ("peer_", peer_label)):
        print(f"{side}:")
        for stage, label in names.items():
            print(
                f"  {label:<35} {summary[f'{prefix}{stage}_p50_le_ms']:>8g}"
                f"  {summary[f'{prefix}{stage}_p99_le_ms']:>8g}"
                f"  {summary[f'{prefix}{stage}_p999_le_ms']:>8g}"
            )
    print(
        f"CPU: broker {summary['broker_cores']:.2f} cores, producing process "
        f"{summary['client_cores']:.2f} cores, kdamond {summary['kdamond_ms_per_s']:.1f} ms/s"
    )
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "produce_tail.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
