"""A cluster of three brokers: failover time, reassignment time, produce p99
during reassignments.

Usage::

    python bench/cluster_bench.py [--rounds 3] [--moves 20] [--rate 2000] [--idle-seconds 8]

Starts a fresh PostgreSQL database (the server on 127.0.0.1:5432), moto's S3
server and three ``tidelake serve`` brokers (``tests/support/cluster.py``:
object WAL, the product's default leases: heartbeat 500 ms, session
timeout 3 s, controller lease 3 s and a pass every 500 ms; the count
balancer off so only the bench moves partitions). One idempotent acks=all confluent-kafka
producer writes sequence numbers to a 6-partition topic at ``--rate``
messages/s (200 bytes) for the whole run. Each round:

- ``failover``: kill -9 of a broker (rotating; the JSON says whether it was
  the controller); for every partition it led, the time from the kill to the
  first ack of a message produced after the kill. A new broker (next node
  id) then joins, so three stay live;
- ``idle``: a window without moves (produce latencies, by produce time);
- ``reassign``: ``--moves`` single-partition moves, one after the other,
  each through AlterPartitionReassignments to a broker that does not lead
  the partition. Two times per move, both from the request: ``metadata``,
  until Metadata shows the target as leader; ``first ack``, until the first
  ack of a message produced after that (the producer has found the new
  leader and the new leader acknowledged a write). Produce latencies of the
  window from the first request to the last move's first ack are compared
  with the idle window's.

At the end every acknowledged message is read back: lost (acked, not read)
and duplicated (read more than once) must both be 0. Prints a table (medians
over rounds, pooled percentiles for moves) and writes
``bench/results/cluster_bench.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import boto3  # noqa: E402
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.integration.broker.rawkafka import RawClient  # noqa: E402
from tests.integration.s3stream.conftest import moto_server  # noqa: E402
from tests.support.cluster import BUCKET, TidelakeCluster  # noqa: E402
from tests.support.postgres import temporary_database  # noqa: E402

TOPIC = "bench-cluster"
PARTITIONS = 6
QUIET = {"log_level": 0, "logger": lambda *a: None}


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Load:
    """One idempotent acks=all producer at a fixed rate, on a thread of its
    own; every ack is kept as (sequence, partition, produced_at, acked_at)."""

    def __init__(self, bootstrap: str, rate: int) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "log_level": 0,
            }
        )
        self.rate = rate
        self.acks: list[tuple[int, int, float, float]] = []
        self.errors = 0
        self.sent = 0
        self.fatal: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)
        self._pad = b"x" * 190

    def _delivered(self, err: Any, msg: Message) -> None:
        if err is not None:
            self.errors += 1
            return
        now = time.monotonic()
        latency = msg.latency() or 0.0
        self.acks.append((int(msg.key()), msg.partition(), now - latency, now))

    def _run(self) -> None:
        tick = 0.005
        per_tick = max(1, round(self.rate * tick))
        next_at = time.monotonic()
        while not self._stop.is_set():
            for _ in range(per_tick):
                seq = self.sent
                try:
                    self.producer.produce(
                        TOPIC,
                        key=b"%d" % seq,
                        value=self._pad,
                        partition=seq % PARTITIONS,
                        on_delivery=self._delivered,
                    )
                except KafkaException as exc:  # a fatal idempotence error: report it
                    self.fatal = f"{time.strftime('%H:%M:%S')} {exc}"
                    print(f"producer failed: {self.fatal}", file=sys.stderr, flush=True)
                    return
                self.sent += 1
            self.producer.poll(0)
            next_at += tick
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_at = time.monotonic()
        self.producer.flush(120)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(180)

    def first_ack_after(
        self, partition: int, produced_after: float, start_index: int
    ) -> float | None:
        for _seq, p, produced, acked in self.acks[start_index:]:
            if p == partition and produced > produced_after:
                return acked
        return None

    def latencies(self, start: float, end: float) -> list[float]:
        return [(a - p) * 1000 for _, _, p, a in self.acks if start <= p < end]


def leaders(admin: AdminClient) -> dict[int, int]:
    t = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
    if t is None or t.error is not None:
        return {}
    return {p: t.partitions[p].leader for p in t.partitions}


def controller(admin: AdminClient) -> int:
    return int(admin.list_topics(timeout=10).controller_id)


def failover(
    cluster: TidelakeCluster, admin: AdminClient, load: Load, victim: int
) -> dict[str, Any]:
    before = leaders(admin)
    was_controller = controller(admin) == victim
    moved = sorted(p for p, n in before.items() if n == victim)
    index = len(load.acks)
    killed_at = time.monotonic()
    cluster.nodes[victim].kill()
    first: dict[int, float] = {}
    deadline = killed_at + 60
    while len(first) < len(moved) and time.monotonic() < deadline and load.fatal is None:
        time.sleep(0.05)
        for p in moved:
            if p not in first:
                t = load.first_ack_after(p, killed_at, index)
                if t is not None:
                    first[p] = t - killed_at
    del cluster.nodes[victim]
    return {
        "victim": victim,
        "victim_was_controller": was_controller,
        "partitions_moved": len(moved),
        "recovered": len(first),
        "failover_s": max(first.values()) if len(first) == len(moved) and moved else None,
        "per_partition_s": {str(p): round(t, 3) for p, t in sorted(first.items())},
    }


def reassign(raw: RawClient, partition: int, target: int) -> None:
    resp = raw.request(
        45,
        0,
        {
            "timeout": 30_000,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [{"partition_index": partition, "replicas": [target]}],
                }
            ],
        },
    )
    code = int(resp.responses[0].partitions[0].error_code)
    if code:
        raise RuntimeError(f"reassignment refused: {resp.responses[0].partitions[0]}")


def moves(
    cluster: TidelakeCluster, admin: AdminClient, load: Load, count: int, start_at: int
) -> tuple[list[dict[str, float]], float, float]:
    out: list[dict[str, float]] = []
    window_start = time.monotonic()
    first_live = next(iter(cluster.nodes.values()))
    with RawClient(first_live.bootstrap, timeout=30) as raw:
        for i in range(count):
            partition = (start_at + i) % PARTITIONS
            current = leaders(admin)
            loads = Counter(current.values())
            candidates = [n for n in cluster.nodes if n != current.get(partition)]
            target = min(candidates, key=lambda n: (loads.get(n, 0), n))
            index = len(load.acks)
            asked = time.monotonic()
            reassign(raw, partition, target)
            deadline = asked + 30
            while leaders(admin).get(partition) != target:
                if time.monotonic() > deadline:
                    for n, proc in cluster.nodes.items():
                        print(f"--- node {n}\n{proc.log_tail(30)}", file=sys.stderr)
                    raise RuntimeError(
                        f"partition {partition} did not move to {target}: {leaders(admin)}"
                    )
                time.sleep(0.01)
            seen = time.monotonic()
            acked = None
            while acked is None and load.fatal is None:
                if time.monotonic() > deadline:
                    for n, proc in cluster.nodes.items():
                        print(f"--- node {n}\n{proc.log_tail(15)}", file=sys.stderr)
                    last = {p: a for _, p, _, a in load.acks[-5000:]}
                    raise RuntimeError(
                        f"no ack on partition {partition} after its move (to {target}); "
                        f"errors {load.errors}, sent {load.sent}, acked {len(load.acks)}, "
                        f"last acks {[(p, round(time.monotonic() - a, 1)) for p, a in last.items()]}"
                    )
                time.sleep(0.005)
                acked = load.first_ack_after(partition, seen, index)
            if acked is None:
                break  # the producer failed
            out.append(
                {"metadata_ms": (seen - asked) * 1000, "first_ack_ms": (acked - asked) * 1000}
            )
    return out, window_start, time.monotonic()


def verify(bootstrap: str, load: Load) -> dict[str, Any]:
    acked = {seq for seq, *_ in load.acks}
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-verify",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    seen: Counter[int] = Counter()
    last_progress = time.monotonic()
    read_by_partition: Counter[int] = Counter()
    marks: dict[int, tuple[int, int]] = {}
    try:
        while time.monotonic() - last_progress < 10 and not acked <= seen.keys():
            batch = consumer.consume(5000, 1.0)
            for m in batch:
                if m.error() is None:
                    seen[int(m.key())] += 1
                    read_by_partition[m.partition()] += 1
            if batch:
                last_progress = time.monotonic()
        for p in range(PARTITIONS):
            marks[p] = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
    finally:
        consumer.close()
    lost = acked - seen.keys()
    by_partition = {
        str(p): {
            "watermarks": marks.get(p),
            "read": read_by_partition[p],
            "acked": sum(1 for q in acked if q % PARTITIONS == p),
            "lost": sum(1 for q in lost if q % PARTITIONS == p),
            "lost_seq_range": [
                min((q for q in lost if q % PARTITIONS == p), default=None),
                max((q for q in lost if q % PARTITIONS == p), default=None),
            ],
        }
        for p in range(PARTITIONS)
    }
    print(json.dumps(by_partition), flush=True)
    return {
        "acked": len(acked),
        "read": sum(seen.values()),
        "lost": len(acked - seen.keys()),
        "duplicated": sum(n - 1 for n in seen.values() if n > 1),
        "delivery_errors": load.errors,
        "fatal_producer_error": load.fatal,
        "by_partition": by_partition,
    }


def range_gaps(url: str) -> dict[str, Any]:
    """Offsets a stream's end counts that no committed object range holds."""
    import psycopg2

    conn = psycopg2.connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT stream_id, start_offset, end_offset FROM streams")
            ends = {sid: (start, end) for sid, start, end in cur.fetchall()}
            cur.execute(
                "SELECT stream_id, start_offset, end_offset FROM object_ranges "
                "ORDER BY stream_id, start_offset"
            )
            gaps: dict[str, Any] = {}
            covered: dict[int, int] = {}
            for sid, lo, hi in cur.fetchall():
                at = covered.get(sid, ends.get(sid, (0, 0))[0])
                if lo > at:
                    gaps.setdefault(str(sid), []).append([at, lo])
                covered[sid] = max(at, hi)
            for sid, (_start, end) in ends.items():
                if covered.get(sid, 0) < end:
                    gaps.setdefault(str(sid), []).append([covered.get(sid, 0), end])
    finally:
        conn.close()
    print(f"object range gaps: {gaps}", flush=True)
    return gaps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--moves", type=int, default=20)
    ap.add_argument("--rate", type=int, default=2000, help="messages/s (200 bytes)")
    ap.add_argument("--idle-seconds", type=float, default=8.0)
    ap.add_argument("--out", default="bench/results/cluster_bench.json")
    ap.add_argument("--no-failover", action="store_true", help="moves only (no kill -9)")
    ap.add_argument("--keep-logs", metavar="DIR", help="brokers' data and logs here, kept")
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
        url = stack.enter_context(temporary_database("tl_cluster_bench"))
        if args.keep_logs:
            root = Path(args.keep_logs)
            root.mkdir(parents=True, exist_ok=True)
        else:
            root = Path(stack.enter_context(_tempdir()))
        cluster = TidelakeCluster(root, url, s3)
        stack.callback(lambda: [p.kill() for p in cluster.nodes.values()])
        env = {
            "TIDELAKE_CLUSTER_BALANCER": "false",
            # the product's defaults, not the tests' shorter leases
            "TIDELAKE_CLUSTER_HEARTBEAT_INTERVAL_MS": "500",
            "TIDELAKE_CLUSTER_SESSION_TIMEOUT_MS": "3000",
            "TIDELAKE_CLUSTER_CONTROLLER_LEASE_MS": "3000",
            "TIDELAKE_CLUSTER_CONTROLLER_INTERVAL_MS": "500",
        }
        for node in (1, 2, 3):
            cluster.start_node(node, **env)
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        while len(ls := leaders(admin)) < PARTITIONS or min(ls.values()) < 0:
            time.sleep(0.2)
        load = Load(bootstrap, args.rate)
        load.start()
        time.sleep(3)  # warm-up
        next_id = 4
        for r in range(args.rounds):
            if load.fatal is not None:
                break
            live = sorted(cluster.nodes)
            victim = live[r % len(live)]
            if args.no_failover:
                fo = {"failover_s": None, "partitions_moved": 0, "victim_was_controller": None}
            else:
                fo = failover(cluster, admin, load, victim)
            try:
                if args.no_failover:
                    raise RuntimeError("no failover: nobody to replace")
                cluster.start_node(next_id, **env)
                fo["joined"] = next_id
            except RuntimeError as exc:  # a start that stalled on a loaded machine
                print(f"node {next_id} did not join: {str(exc)[-300:]}", file=sys.stderr)
                fo["joined"] = None
            next_id += 1
            time.sleep(2)  # the new broker settles
            idle_start = time.monotonic()
            time.sleep(args.idle_seconds)
            idle = load.latencies(idle_start, time.monotonic())
            mv, w0, w1 = moves(cluster, admin, load, args.moves, r)
            during = load.latencies(w0, w1)
            row = {
                "failover": fo,
                "moves": mv,
                "move_first_ack_ms": {
                    "p50": pct([m["first_ack_ms"] for m in mv], 0.5),
                    "p99": pct([m["first_ack_ms"] for m in mv], 0.99),
                },
                "move_metadata_ms": {
                    "p50": pct([m["metadata_ms"] for m in mv], 0.5),
                    "p99": pct([m["metadata_ms"] for m in mv], 0.99),
                },
                "produce_idle_ms": {"n": len(idle), "p50": pct(idle, 0.5), "p99": pct(idle, 0.99)},
                "produce_moving_ms": {
                    "n": len(during),
                    "p50": pct(during, 0.5),
                    "p99": pct(during, 0.99),
                },
            }
            results["rounds"].append(row)
            print(
                f"round {r + 1}: failover {fo['failover_s']} s "
                f"({fo['partitions_moved']} partitions, controller={fo['victim_was_controller']}); "
                f"moves first-ack p50 {row['move_first_ack_ms']['p50']:.0f} ms "
                f"p99 {row['move_first_ack_ms']['p99']:.0f} ms; produce p99 idle "
                f"{row['produce_idle_ms']['p99']:.1f} ms, moving {row['produce_moving_ms']['p99']:.1f} ms",
                flush=True,
            )
        load.stop()
        results["verify"] = verify(cluster.bootstrap, load)
        results["object_range_gaps"] = range_gaps(url)
    results["load_average_after"] = os.getloadavg()
    results["wall_s"] = time.monotonic() - started
    results["settings"] = vars(args)
    _report(results)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")
    v = results["verify"]
    return 0 if v["lost"] == 0 and v["duplicated"] == 0 and not v["fatal_producer_error"] else 1


def _tempdir() -> Any:
    import tempfile

    return tempfile.TemporaryDirectory(prefix="tl-cluster-bench-")


def _report(results: dict[str, Any]) -> None:
    rounds = results["rounds"]
    fo = [r["failover"]["failover_s"] for r in rounds if r["failover"]["failover_s"] is not None]
    all_moves = [m for r in rounds for m in r["moves"]]
    ack = [m["first_ack_ms"] for m in all_moves]
    meta = [m["metadata_ms"] for m in all_moves]
    idle99 = [r["produce_idle_ms"]["p99"] for r in rounds]
    moving99 = [r["produce_moving_ms"]["p99"] for r in rounds]
    print()
    print(f"{'measure':<42} {'median':>10} {'range':>22}")

    def line(name: str, values: list[float], unit: str) -> None:
        if values:
            print(
                f"{name:<42} {statistics.median(values):>8.2f}{unit:>2} "
                f"{min(values):>10.2f} - {max(values):.2f}"
            )

    line("failover: kill -9 -> first ack, every part.", fo, "s")
    line(
        "reassign: request -> first ack, p50/round",
        [r["move_first_ack_ms"]["p50"] for r in rounds],
        "ms",
    )
    line(
        "reassign: request -> first ack, p99/round",
        [r["move_first_ack_ms"]["p99"] for r in rounds],
        "ms",
    )
    line(
        "reassign: request -> metadata, p50/round",
        [r["move_metadata_ms"]["p50"] for r in rounds],
        "ms",
    )
    line("produce p99, idle window", idle99, "ms")
    line("produce p99, during reassignments", moving99, "ms")
    print(
        f"pooled over {len(all_moves)} moves: first ack p50 {pct(ack, 0.5):.0f} ms, "
        f"p99 {pct(ack, 0.99):.0f} ms; metadata p50 {pct(meta, 0.5):.0f} ms, p99 {pct(meta, 0.99):.0f} ms"
    )
    v = results["verify"]
    print(
        f"acked {v['acked']}, read {v['read']}, lost {v['lost']}, duplicated {v['duplicated']}, "
        f"delivery errors {v['delivery_errors']}; wall {results['wall_s']:.0f} s"
    )
    if v["fatal_producer_error"]:
        print(f"the producer failed: {v['fatal_producer_error']}")


if __name__ == "__main__":
    sys.exit(main())
