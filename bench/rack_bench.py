"""Zero cross-AZ reads: the share of consumer payload bytes that crosses racks
and the consumer end-to-end latency, with and without ``client.rack``, in one run.

Usage::

    python bench/rack_bench.py [--rounds 3] [--seconds 10] [--rate 500] [--upload-interval-ms 2000]

Starts a fresh PostgreSQL database (the server on 127.0.0.1:5432), moto's S3
server and four ``tidelake serve`` brokers, nodes 1-2 in rack ``a`` and 3-4 in
rack ``b`` (``tests/support/cluster.py``; the balancer off so leaders stay
put; the upload interval as given, the product's default 2 s unless told).
One acks=all producer writes ``--rate`` messages/s of 1 KiB, each stamped with
its produce time, to an 8-partition topic for ``--seconds`` per round. Four
consumers read every partition from the end: one in each rack with
``client.rack`` set, one in each rack without it. Per round:

- cross-rack share with ``client.rack``: payload bytes the brokers fetched to
  consumers of another rack over all they fetched to rack-aware consumers
  (the ``tidelake_rack_payload_bytes`` metric, deltas over the round);
- cross-rack share without it: the consumed bytes of partitions whose leader
  is in the other rack than the consumer (they read from leaders only);
- end-to-end latency (produce time to consume time) p50/p99 of each kind.

Every consumer must read every message of the round exactly once. Prints a
table (medians over rounds) and writes ``bench/results/rack_bench.json``.

``--combined``: zero cross-AZ end to end instead. Two idempotent acks=all
producers, one per rack, each write ``--rate``/2 messages/s and announce their
rack in ``client.id`` (``tidelake_rack=<rack>``); two consumers, one per rack,
announce it the same way (rack b also sets ``client.rack``). Metadata routes
them all to brokers of their rack. Per round: the cross-rack share of all
payload bytes, produced plus fetched (the metric, deltas over the round; the
issue's target is at most 5 %), produce latency (send to acknowledgement) and
end-to-end latency p50/p99. Writes ``bench/results/rack_bench_combined.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import sys
import threading
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import boto3  # noqa: E402
from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from tests.integration.s3stream.conftest import moto_server  # noqa: E402
from tests.support.cluster import BUCKET, TidelakeCluster  # noqa: E402
from tests.support.postgres import temporary_database  # noqa: E402

TOPIC = "bench-racks"
PARTITIONS = 8
RACKS = {1: "a", 2: "a", 3: "b", 4: "b"}
QUIET = {"log_level": 0, "logger": lambda *a: None}
_STAMP = struct.Struct(">dQ")  # produce time, sequence


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def tagged(role: str, rack: str) -> str:
    """A client.id that announces ``rack`` (Metadata routes the client to it)."""
    return f"rack-bench-{role},tidelake_rack={rack}"


class Reader(threading.Thread):
    def __init__(
        self, bootstrap: str, rack: str, aware: bool, round_no: int, client_id: str | None = None
    ) -> None:
        super().__init__(daemon=True)
        conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": f"rack-bench-{round_no}-{rack}-{aware}-{client_id}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            **QUIET,
        }
        if aware:
            conf["client.rack"] = rack
        if client_id is not None:
            conf["client.id"] = client_id
        self.rack, self.aware = rack, aware
        self.consumer = Consumer(conf)
        self.consumer.assign([TopicPartition(TOPIC, p, OFFSET_END) for p in range(PARTITIONS)])
        self.latencies_ms: list[float] = []
        self.bytes_by_partition = [0] * PARTITIONS
        self.seen: dict[int, int] = {}
        self.stop = threading.Event()
        self.ready = threading.Event()

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                m = self.consumer.poll(0.1)
                if m is None or m.error():
                    if m is None and self.consumer.assignment():
                        self.ready.set()
                    continue
                value, q = m.value(), m.partition()
                if value is None or q is None:
                    continue
                now = time.time()
                sent_at, seq = _STAMP.unpack_from(value)
                self.latencies_ms.append((now - sent_at) * 1000)
                self.bytes_by_partition[q] += len(value)
                self.seen[seq] = self.seen.get(seq, 0) + 1
        finally:
            self.consumer.close()


def rack_bytes(cluster: TidelakeCluster) -> dict[tuple[str, str], float]:
    """(broker rack, client rack) -> payload bytes fetched, over the brokers."""
    out: dict[tuple[str, str], float] = {}
    for proc in cluster.live():
        with urllib.request.urlopen(f"{proc.http_url}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            if family.name == "tidelake_rack_payload_bytes":
                for s in family.samples:
                    if s.labels["direction"] == "fetch":
                        key = (s.labels["broker_rack"], s.labels["client_rack"])
                        out[key] = out.get(key, 0) + s.value
    return out


def rack_bytes_all(cluster: TidelakeCluster) -> dict[tuple[str, str, str], float]:
    """(broker rack, client rack, direction) -> payload bytes, over the brokers."""
    out: dict[tuple[str, str, str], float] = {}
    for proc in cluster.live():
        with urllib.request.urlopen(f"{proc.http_url}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            if family.name == "tidelake_rack_payload_bytes":
                for s in family.samples:
                    labels = s.labels
                    key = (labels["broker_rack"], labels["client_rack"], labels["direction"])
                    out[key] = out.get(key, 0) + s.value
    return out


def combined_round(cluster: TidelakeCluster, r: int, seconds: float, rate: int) -> dict[str, Any]:
    """Rack-tagged producers and consumers in both racks (``--combined``)."""
    readers = [
        Reader(cluster.bootstrap, "a", False, r, tagged("consumer", "a")),
        Reader(cluster.bootstrap, "b", True, r, tagged("consumer", "b")),
    ]
    for rd in readers:
        rd.start()
    for rd in readers:
        rd.ready.wait(30)
    time.sleep(1)  # assigned at the end: nothing produced before counts
    before = rack_bytes_all(cluster)
    pad = b"x" * (1024 - _STAMP.size)
    produce_ms: list[float] = []
    failed: list[str] = []
    lock = threading.Lock()
    per_producer = max(1, rate // 2)

    def produce(rack: str, first_seq: int) -> None:
        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "client.id": tagged("producer", rack),
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                **QUIET,
            }
        )

        def delivered(err: Any, msg: Any) -> None:
            with lock:
                if err is not None:
                    failed.append(str(err))
                else:
                    produce_ms.append((time.time() - _STAMP.unpack_from(msg.value())[0]) * 1000)

        n, started, tick = 0, time.monotonic(), 0.01
        per_tick = max(1, round(per_producer * tick))
        while time.monotonic() - started < seconds:
            for _ in range(per_tick):
                seq = first_seq + n
                value = _STAMP.pack(time.time(), seq) + pad
                producer.produce(
                    TOPIC, value=value, partition=n % PARTITIONS, on_delivery=delivered
                )
                n += 1
            producer.poll(0)
            time.sleep(max(0.0, started + (n / per_tick) * tick - time.monotonic()))
        producer.flush(60)
        counts[rack] = n

    counts: dict[str, int] = {}
    threads = [
        threading.Thread(target=produce, args=(rack, i << 40)) for i, rack in enumerate("ab")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sent = sum(counts.values())
    deadline = time.monotonic() + 60
    while any(len(rd.seen) < sent for rd in readers) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(0.5)
    for rd in readers:
        rd.stop.set()
    for rd in readers:
        rd.join(15)
    after = rack_bytes_all(cluster)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    total = sum(delta.values())
    cross = sum(v for (b, c, _), v in delta.items() if b != c)
    lat = [x for rd in readers for x in rd.latencies_ms]
    return {
        "sent": sent,
        "failed": len(failed),
        "read": {rd.rack: len(rd.seen) for rd in readers},
        "duplicated": sum(1 for rd in readers for n in rd.seen.values() if n > 1),
        "missing": sum(sent - len(rd.seen) for rd in readers) + len(failed),
        "payload_bytes": total,
        "cross_rack_bytes": cross,
        "cross_rack_share": cross / total if total else None,
        "produce_ms": {"p50": pct(produce_ms, 0.5), "p99": pct(produce_ms, 0.99)},
        "e2e_ms": {"p50": pct(lat, 0.5), "p99": pct(lat, 0.99)},
        "bytes_by_rack_pair": {f"{b}->{c or '?'} {d}": v for (b, c, d), v in delta.items()},
    }


def leaders(admin: AdminClient) -> dict[int, int]:
    t = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
    if t is None:
        return {}
    return {p: t.partitions[p].leader for p in t.partitions}


def one_round(
    cluster: TidelakeCluster, admin: AdminClient, r: int, seconds: float, rate: int
) -> dict[str, Any]:
    readers = [
        Reader(cluster.bootstrap, rack, aware, r) for rack in "ab" for aware in (True, False)
    ]
    for rd in readers:
        rd.start()
    for rd in readers:
        rd.ready.wait(30)
    time.sleep(1)  # assigned at the end: nothing produced before counts
    before = rack_bytes(cluster)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 2, **QUIET}
    )
    pad = b"x" * (1024 - _STAMP.size)
    sent = 0
    started = time.monotonic()
    tick = 0.01
    per_tick = max(1, round(rate * tick))
    while time.monotonic() - started < seconds:
        for _ in range(per_tick):
            producer.produce(
                TOPIC, value=_STAMP.pack(time.time(), sent) + pad, partition=sent % PARTITIONS
            )
            sent += 1
        producer.poll(0)
        time.sleep(max(0.0, started + (sent / per_tick) * tick - time.monotonic()))
    producer.flush(60)
    deadline = time.monotonic() + 60
    while any(len(rd.seen) < sent for rd in readers) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(0.5)
    for rd in readers:
        rd.stop.set()
    for rd in readers:
        rd.join(15)
    after = rack_bytes(cluster)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    aware_total = sum(v for (_, c), v in delta.items() if c)
    aware_cross = sum(v for (b, c), v in delta.items() if c and b != c)
    lead = leaders(admin)
    plain = [rd for rd in readers if not rd.aware]
    plain_total = sum(sum(rd.bytes_by_partition) for rd in plain)
    plain_cross = sum(
        n
        for rd in plain
        for q, n in enumerate(rd.bytes_by_partition)
        if RACKS.get(lead.get(q, -1)) != rd.rack
    )
    kinds: dict[str, Any] = {}
    for aware in (True, False):
        lat = [x for rd in readers if rd.aware == aware for x in rd.latencies_ms]
        kinds["with_client_rack" if aware else "without_client_rack"] = {
            "e2e_ms": {"p50": pct(lat, 0.5), "p99": pct(lat, 0.99)},
        }
    kinds["with_client_rack"]["cross_rack_share"] = (
        aware_cross / aware_total if aware_total else None
    )
    kinds["without_client_rack"]["cross_rack_share"] = (
        plain_cross / plain_total if plain_total else None
    )
    return {
        "sent": sent,
        "read": {f"{rd.rack}-{'aware' if rd.aware else 'plain'}": len(rd.seen) for rd in readers},
        "duplicated": sum(1 for rd in readers for n in rd.seen.values() if n > 1),
        "missing": sum(sent - len(rd.seen) for rd in readers),
        "leaders": lead,
        "fetch_bytes_by_rack_pair": {f"{b}->{c or '?'}": v for (b, c), v in delta.items()},
        **kinds,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=500, help="messages/s (1 KiB)")
    ap.add_argument("--upload-interval-ms", type=int, default=2000)
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--combined", action="store_true", help="rack-tagged producers and consumers in both racks"
    )
    args = ap.parse_args()
    if args.out is None:
        name = "rack_bench_combined" if args.combined else "rack_bench"
        args.out = f"bench/results/{name}.json"
    started = time.monotonic()
    results: dict[str, Any] = {
        "load_average_before": os.getloadavg(),
        "upload_interval_ms": args.upload_interval_ms,
        "rate": args.rate,
        "combined": args.combined,
        "rounds": [],
    }
    with ExitStack() as stack:
        s3 = stack.enter_context(moto_server())
        boto3.client(
            "s3",
            endpoint_url=s3,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        ).create_bucket(Bucket=BUCKET)
        url = stack.enter_context(temporary_database("tl_rack_bench"))
        root = Path(stack.enter_context(_tempdir()))
        cluster = TidelakeCluster(
            root,
            url,
            s3,
            {
                "TIDELAKE_CLUSTER_BALANCER": "false",
                "TIDELAKE_STORAGE_UPLOAD_INTERVAL_MS": str(args.upload_interval_ms),
            },
        )
        stack.callback(cluster.stop)
        for node, rack in RACKS.items():
            cluster.start_node(node, TIDELAKE_BROKER_RACK=rack)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **QUIET})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        while len(ls := leaders(admin)) < PARTITIONS or min(ls.values()) < 0:
            time.sleep(0.2)
        for r in range(args.rounds):
            if args.combined:
                rnd = combined_round(cluster, r, args.seconds, args.rate)
            else:
                rnd = one_round(cluster, admin, r, args.seconds, args.rate)
            results["rounds"].append(rnd)
            print(json.dumps({k: rnd[k] for k in ("sent", "read", "duplicated")}), flush=True)
    results["load_average_after"] = os.getloadavg()
    results["wall_s"] = time.monotonic() - started
    (_report_combined if args.combined else _report)(results)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")
    bad = sum(r["duplicated"] + r["missing"] for r in results["rounds"])
    return 0 if bad == 0 else 1


def _tempdir() -> Any:
    import tempfile

    return tempfile.TemporaryDirectory(prefix="tl-rack-bench-")


def _report(results: dict[str, Any]) -> None:
    rounds = results["rounds"]
    print()
    print(f"upload interval {results['upload_interval_ms']} ms, {results['rate']} msg/s of 1 KiB")
    print(f"{'consumers':<22} {'cross-rack share':>17} {'e2e p50 ms':>11} {'e2e p99 ms':>11}")
    for kind in ("with_client_rack", "without_client_rack"):
        share = [
            r[kind]["cross_rack_share"] for r in rounds if r[kind]["cross_rack_share"] is not None
        ]
        p50 = [r[kind]["e2e_ms"]["p50"] for r in rounds]
        p99 = [r[kind]["e2e_ms"]["p99"] for r in rounds]
        print(
            f"{kind.replace('_', ' '):<22} {statistics.median(share) * 100:>16.1f}% "
            f"{statistics.median(p50):>11.0f} {statistics.median(p99):>11.0f}"
        )
    missing = sum(r["missing"] for r in rounds)
    dup = sum(r["duplicated"] for r in rounds)
    print(
        f"medians of {len(rounds)} rounds; missing {missing}, duplicated {dup}; "
        f"wall {results['wall_s']:.0f} s"
    )


def _report_combined(results: dict[str, Any]) -> None:
    rounds = results["rounds"]
    share = [r["cross_rack_share"] for r in rounds if r["cross_rack_share"] is not None]
    print()
    print(f"upload interval {results['upload_interval_ms']} ms, {results['rate']} msg/s of 1 KiB")
    print(
        f"cross-rack share of payload produced + fetched: {statistics.median(share) * 100:.2f} %"
        f" (max {max(share) * 100:.2f} %)"
    )
    for key in ("produce_ms", "e2e_ms"):
        p50 = statistics.median(r[key]["p50"] for r in rounds)
        p99 = statistics.median(r[key]["p99"] for r in rounds)
        print(f"{key[:-3]} latency p50 {p50:.0f} ms, p99 {p99:.0f} ms")
    missing = sum(r["missing"] for r in rounds)
    dup = sum(r["duplicated"] for r in rounds)
    print(
        f"medians of {len(rounds)} rounds; missing {missing}, duplicated {dup}; "
        f"wall {results['wall_s']:.0f} s"
    )


if __name__ == "__main__":
    sys.exit(main())
