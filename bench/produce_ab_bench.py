"""The CPU one Produce costs, this checkout next to a git ref, in one run
(issue #18): the way to judge a change to the per-request path on a shared VM.

Round trips on a 2-core VM move by tens of percent between runs, more than
most changes to the produce path save. So both brokers run at once: the
baseline (``--baseline``, checked out into a temporary git worktree, its C
modules built there) and this checkout, each ``tidelake serve`` with its data
directory under ``--data-dir`` (tmpfs by default: the broker's own work,
without the disk), and one raw client (a blocking socket, no librdkafka)
sends each the same Produce frame (acks=all, ``--partitions`` x one lz4
batch of ``--records`` records of 1 KiB, ``produce_rtt_bench``'s request)
with one request in flight (``--in-flight N``: N pipelined, as a
producer at full speed keeps them), in alternating blocks of ``--per-block``
requests, the order of the two flipped every block. For each block it takes
the broker's CPU per request (the scheduler's run time of all its threads,
background uploads included) and the round trips; drift in the machine's
speed meets both sides alike. Prints medians over the blocks and writes
bench/results/produce_ab.json.

With ``--data-dir`` on a disk the two brokers share its journal, so a change
to how the WAL writes is judged by alternating runs of ``produce_rtt_bench``
instead.

    python -m bench.produce_ab_bench --baseline HEAD~1 [--blocks 30] [--per-block 200]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.broker_bench import _create_topic  # noqa: E402
from bench.produce_rtt_bench import _TOPIC, _cpu_seconds, frames  # noqa: E402
from tests.integration.broker.rawkafka import RawClient  # noqa: E402
from tests.support.net import free_port, wait_for_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
_WARM_UP_BLOCKS = 3


def _worktree(ref: str, where: Path) -> Path:
    """``ref`` checked out at ``where``, its C modules built in place."""
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(where), ref], check=True
    )
    built = subprocess.run(
        [sys.executable, "-c", "from setuptools import setup; setup()", "build_ext", "--inplace"],
        cwd=where,
        capture_output=True,
        text=True,
    )
    if built.returncode != 0:
        raise RuntimeError(f"building {ref}'s C modules failed:\n{built.stderr[-4000:]}")
    return where


class _Broker:
    def __init__(self, name: str, tree: Path, data: Path, partitions: int) -> None:
        self.name = name
        ports = [free_port() for _ in range(3)]
        env = dict(os.environ, TIDELAKE_LOG_LEVEL="WARNING", PYTHONPATH=str(tree))
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "api.cli", "serve", "--data-dir", str(data),
                "--kafka-listen", f"127.0.0.1:{ports[0]}",
                "--registry-listen", f"127.0.0.1:{ports[1]}",
                "--http-listen", f"127.0.0.1:{ports[2]}",
            ],
            cwd=tree,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        for port in ports:
            wait_for_port(port, 60)
        bootstrap = f"127.0.0.1:{ports[0]}"
        _create_topic(bootstrap, _TOPIC, partitions)
        self.client = RawClient(bootstrap, timeout=30)
        self.client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cpu_us: list[float] = []
        self.latencies_ms: list[float] = []

    def block(self, requests: list[bytes], keep: bool, in_flight: int = 1) -> None:
        before = _cpu_seconds(self.proc.pid)
        times = []
        sent: deque[float] = deque()  # send times of the requests in flight, in order
        for frame in requests:
            if len(sent) == in_flight:
                self.client.recv_frame()
                times.append((time.perf_counter() - sent.popleft()) * 1000)
            sent.append(time.perf_counter())
            self.client.send_raw(frame)
        while sent:
            self.client.recv_frame()
            times.append((time.perf_counter() - sent.popleft()) * 1000)
        if keep:
            self.cpu_us.append((_cpu_seconds(self.proc.pid) - before) / len(requests) * 1e6)
            self.latencies_ms.extend(times)

    def summary(self) -> dict[str, float]:
        lat = sorted(self.latencies_ms)
        n = len(lat)
        return {
            "cpu_us_per_request": statistics.median(self.cpu_us),
            "p50_ms": lat[n // 2],
            "p90_ms": lat[int(n * 0.9)],
            "p99_ms": lat[int(n * 0.99)],
        }

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="a git ref: the version to compare against")
    ap.add_argument("--blocks", type=int, default=30)
    ap.add_argument("--per-block", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--records", type=int, default=27)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--data-dir", default="/dev/shm")
    ap.add_argument(
        "--in-flight", type=int, default=1, help="requests pipelined on the connection"
    )
    args = ap.parse_args()
    requests = frames(args.per_block, args.records, args.size, args.partitions)
    brokers: list[_Broker] = []
    with tempfile.TemporaryDirectory(prefix="produce-ab-") as tmp:
        tree = Path(tmp) / "baseline"
        try:
            _worktree(args.baseline, tree)
            with tempfile.TemporaryDirectory(dir=args.data_dir) as data:
                # the brokers stop before their data directory is removed:
                # stopped after, they wrote into it again and left it behind
                try:
                    brokers.append(_Broker("baseline", tree, Path(data) / "a", args.partitions))
                    brokers.append(
                        _Broker("this checkout", ROOT, Path(data) / "b", args.partitions)
                    )
                    for b in range(_WARM_UP_BLOCKS + args.blocks):
                        for broker in brokers if b % 2 == 0 else brokers[::-1]:
                            broker.block(requests, b >= _WARM_UP_BLOCKS, args.in_flight)
                    summaries = {b.name: b.summary() for b in brokers}
                finally:
                    for broker in brokers:
                        broker.stop()
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                check=False,
                stderr=subprocess.DEVNULL,
            )
    base, new = summaries["baseline"], summaries["this checkout"]
    print(
        f"\n{args.in_flight} Produce in flight ({args.partitions} x {args.records} lz4 records of "
        f"{args.size} B), {args.blocks} alternating blocks of {args.per_block}, medians"
    )
    print(f"{'':28s}{'CPU us/req':>12s}{'p50 ms':>9s}{'p90 ms':>9s}{'p99 ms':>9s}")
    for name, m in summaries.items():
        label = f"{name} ({args.baseline})" if name == "baseline" else name
        print(
            f"{label:28s}{m['cpu_us_per_request']:>12.0f}{m['p50_ms']:>9.3f}"
            f"{m['p90_ms']:>9.3f}{m['p99_ms']:>9.3f}"
        )
    ratio = new["cpu_us_per_request"] / base["cpu_us_per_request"]
    print(f"CPU per request, this checkout / baseline: {ratio:.3f}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "produce_ab.json"
    out.write_text(
        json.dumps(
            {
                "benchmark": "produce_ab",
                "machine_cores": os.cpu_count(),
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "settings": vars(args),
                "summaries": summaries,
                "cpu_ratio": ratio,
                "blocks": {b.name: b.cpu_us for b in brokers},
            },
            indent=2,
        )
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
