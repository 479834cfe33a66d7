"""Self-balancing by traffic: time to balance a skewed load on three brokers.

Usage::

    python bench/balancer_bench.py [--rounds 3] [--window-ms 5000] [--hot-kbps 150] [--even-kbps 40]

Starts a fresh PostgreSQL database (the server on 127.0.0.1:5432), moto's S3
server and three ``tidelake serve`` brokers (``tests/support/cluster.py``),
with ``balancer_window_ms = --window-ms``, ``load_report_interval_ms = 1000``,
``balance_interval_ms = 1000``, ``balancer_min_bytes_per_s = 20000`` (so
the even load below is enough for traffic to decide, and the count balancer
does not spread the hot topic before its traffic starts) and the other
``balancer_*`` keys at their defaults. One idempotent acks=all confluent-kafka producer writes 1 kB
records to an ``even`` topic (6 partitions, two per broker, ``--even-kbps``
kB/s each) for the whole run, so traffic decides. Each round creates a new
6-partition hot topic, moves all of its partitions to one broker (rotating)
with AlterPartitionReassignments, and starts producing ``--hot-kbps`` kB/s to
each. Measured from the first hot produce:

- ``skew seen``: until the hot broker's reported bytes/s exceed 2x the mean;
- ``balanced``: until they are back under the mean x (1 + margin);
- the moves the controller made (``tidelake cluster status`` decisions).

The baseline in the same run is the configured window (nothing may move
earlier) and the skew itself (the hot broker's share of the mean before the
first move). At the end every acknowledged record is read back (lost and
duplicated must be 0). Prints a table (median of the rounds) and writes
``bench/results/balancer_bench.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import boto3  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kafka import TopicPartition  # noqa: E402
from kafka.admin import KafkaAdminClient  # noqa: E402

from tests.integration.broker.conftest import consume_range, quiet  # noqa: E402
from tests.integration.cluster.test_cluster_balancer import (  # noqa: E402
    _decisions,
    _epochs,
    _Load,
    _loads,
)
from tests.integration.s3stream.conftest import moto_server  # noqa: E402
from tests.support.cluster import BUCKET, TidelakeCluster  # noqa: E402
from tests.support.postgres import temporary_database  # noqa: E402

MARGIN = 0.2
PARTITIONS = 6


def _share(cluster: TidelakeCluster, node: int) -> float:
    loads = _loads(cluster)
    mean = sum(loads.values()) / len(loads)
    return loads[node] / mean if mean else 0.0


def _until(check: Any, timeout: float) -> float | None:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if check():
            return time.monotonic() - began
        time.sleep(0.1)
    return None


def _round(
    cluster: TidelakeCluster, load: _Load, r: int, args: argparse.Namespace
) -> dict[str, Any]:
    topic = f"hot-{r}"
    hot = 1 + r % 3
    bootstrap = cluster.bootstrap
    admin = AdminClient(quiet({"bootstrap.servers": bootstrap}))  # alive until the answer
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    _until(lambda: len(_epochs(cluster, topic)) == PARTITIONS, 30)
    kp = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        kp.alter_partition_reassignments(
            {TopicPartition(topic, p): [hot] for p in range(PARTITIONS)}
        )
    finally:
        kp.close()
    _until(lambda: {lead for lead, _ in _epochs(cluster, topic).values()} == {hot}, 30)
    before = len(_decisions(cluster))
    began = time.monotonic()
    load.set_rate(topic, PARTITIONS, args.hot_kbps)
    seen = _until(lambda: _share(cluster, hot) > 2, 60)
    skew = _share(cluster, hot)
    balanced = (
        None
        if seen is None
        else _until(lambda: _share(cluster, hot) <= 1 + MARGIN, args.window_ms / 1000 + 90)
    )
    took = None if balanced is None else time.monotonic() - began
    load.set_rate(topic, PARTITIONS, 0)  # this round's topic goes quiet
    moves = _decisions(cluster)[before:]
    row = {
        "hot_node": hot,
        "skew_seen_s": seen,
        "skew_share_of_mean": skew,
        "balanced_s": took,
        "moves": len(moves),
        "decisions": [f"[{d['by']}] {d['reason']}" for d in moves],
        "share_after": _share(cluster, hot),
    }
    print(
        f"round {r + 1}: node {hot} at {skew:.1f}x the mean, seen after {seen or -1:.1f} s; "
        f"under {1 + MARGIN:.1f}x after {took or -1:.1f} s with {len(moves)} moves",
        flush=True,
    )
    time.sleep(3)  # the quiet topic's traffic leaves the reports
    return row


def _verify(bootstrap: str, load: _Load) -> dict[str, Any]:
    acked = read = lost = dup = 0
    for topic, values in load.acked.items():
        got = [
            bytes(m.value() or b"")
            for m in consume_range(bootstrap, topic, range(PARTITIONS), len(values), timeout=180)
        ]
        acked += len(values)
        read += len(got)
        lost += len(values - set(got))
        dup += len(got) - len(set(got))
    return {"acked": acked, "read": read, "lost": lost, "duplicated": dup}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--window-ms", type=int, default=5000)
    ap.add_argument("--hot-kbps", type=float, default=150, help="kB/s per hot partition")
    ap.add_argument("--even-kbps", type=float, default=40, help="kB/s per even partition")
    ap.add_argument("--out", default="bench/results/balancer_bench.json")
    args = ap.parse_args()

    started = time.monotonic()
    results: dict[str, Any] = {"load_average_before": os.getloadavg(), "rounds": []}
    with ExitStack() as stack:
        s3 = stack.enter_context(moto_server())
        boto3.client(
            "s3",
            endpoint_url=s3,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        ).create_bucket(Bucket=BUCKET)
        url = stack.enter_context(temporary_database("tl_balancer_bench"))
        root = Path(stack.enter_context(_tempdir()))
        cluster = TidelakeCluster(
            root,
            url,
            s3,
            {
                "TIDELAKE_CLUSTER_LOAD_REPORT_INTERVAL_MS": "1000",
                "TIDELAKE_CLUSTER_BALANCER_WINDOW_MS": str(args.window_ms),
                "TIDELAKE_CLUSTER_BALANCER_MARGIN": str(MARGIN),
                "TIDELAKE_CLUSTER_BALANCER_MIN_BYTES_PER_S": "20000",
            },
        )
        stack.callback(cluster.stop)
        for node in (1, 2, 3):
            cluster.start_node(node)
        bootstrap = cluster.bootstrap
        admin = AdminClient(quiet({"bootstrap.servers": bootstrap}))
        admin.create_topics([NewTopic("even", PARTITIONS, 1)])["even"].result(30)
        _until(lambda: len(_epochs(cluster, "even")) == PARTITIONS, 30)
        load = _Load(bootstrap)
        load.set_rate("even", PARTITIONS, args.even_kbps)
        load.start()
        _until(lambda: min(_loads(cluster).values()) > 0, 30)
        for r in range(args.rounds):
            results["rounds"].append(_round(cluster, load, r, args))
        load.stop()
        results["verify"] = _verify(bootstrap, load)
        results["producer_failed"] = load.failed
        results["producer_fatal"] = [str(e) for e in load.errors if e.fatal()]
    results["load_average_after"] = os.getloadavg()
    results["wall_s"] = time.monotonic() - started
    results["settings"] = vars(args)
    _report(results, args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")
    v = results["verify"]
    ok = v["lost"] == 0 and v["duplicated"] == 0 and not results["producer_failed"]
    return 0 if ok and all(r["balanced_s"] is not None for r in results["rounds"]) else 1


def _tempdir() -> Any:
    import tempfile

    return tempfile.TemporaryDirectory(prefix="tl-balancer-bench-")


def _report(results: dict[str, Any], args: argparse.Namespace) -> None:
    rounds = results["rounds"]
    print()
    print(f"{'measure':<44} {'median':>9} {'range':>20}")

    def line(name: str, values: list[float], unit: str) -> None:
        if values:
            print(
                f"{name:<44} {statistics.median(values):>7.1f}{unit:>2} "
                f"{min(values):>9.1f} - {max(values):.1f}"
            )

    line("baseline: balancer_window_ms", [args.window_ms / 1000] * len(rounds), "s")
    line("baseline: hot broker / mean before moves", [r["skew_share_of_mean"] for r in rounds], "x")
    line(
        "skew start -> skew seen in the reports",
        [r["skew_seen_s"] for r in rounds if r["skew_seen_s"] is not None],
        "s",
    )
    line(
        "time to balance: skew start -> under margin",
        [r["balanced_s"] for r in rounds if r["balanced_s"] is not None],
        "s",
    )
    line("moves per round", [float(r["moves"]) for r in rounds], "")
    line("hot broker / mean after", [r["share_after"] for r in rounds], "x")
    v = results["verify"]
    print(
        f"acked {v['acked']}, read {v['read']}, lost {v['lost']}, duplicated {v['duplicated']}, "
        f"failed deliveries {len(results['producer_failed'])}; wall {results['wall_s']:.0f} s; "
        f"load average {results['load_average_before'][0]:.1f} -> "
        f"{results['load_average_after'][0]:.1f}"
    )


if __name__ == "__main__":
    sys.exit(main())
