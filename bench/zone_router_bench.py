"""Rack-routed produce next to direct produce, in the same run (issue #16).

Usage::

    python bench/zone_router_bench.py [--rounds 3] [--batches 150] [--records 10]

Starts a fresh PostgreSQL database (the server on 127.0.0.1:5432), moto's S3
server and four ``tidelake serve`` brokers in two racks (a: 1, 2; b: 3, 4;
``tests/support/cluster.py``: object WAL; the product's default leases; the
balancer off). Two idempotent acks=all producers speak the raw protocol
(``tests/support/routed_producer.py``), one request at a time:

- ``routed``: a producer announcing ``tidelake_rack=a`` sends each rack-b
  partition's batches to the rack-a broker ``routed_leader`` names; that broker
  writes them to a router object and the leader appends them from S3;
- ``direct, cross-rack``: a producer announcing nothing sends the same
  partitions' batches to their leaders in rack b (what Kafka does);
- ``direct, same rack``: the rack-a producer's batches for partitions led in
  rack a (no routing needed).

The three are interleaved batch by batch, so they share the machine's load.
Each round measures ``--batches`` batches per partition of ``--records``
records of 200 bytes; p50/p99 per round, medians over rounds. At the end every
acknowledged batch is read back at the offset its producer was told (lost and
misplaced must be 0) and the router objects left in S3 are counted (0
expected). Prints a table and writes ``bench/results/zone_router_bench.json``.
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

from tests.integration.broker.conftest import consume_range, quiet  # noqa: E402
from tests.integration.s3stream.conftest import moto_server  # noqa: E402
from tests.support.cluster import BUCKET, TidelakeCluster  # noqa: E402
from tests.support.postgres import temporary_database  # noqa: E402
from tests.support.routed_producer import RoutedProducer, Sent  # noqa: E402

RACKS = {1: "a", 2: "a", 3: "b", 4: "b"}
TOPIC = "zone-router-bench"
PARTITIONS = 8
GROUPS = ("routed", "direct, cross-rack", "direct, same rack")


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", type=int, default=150, help="batches per partition per round")
    ap.add_argument("--records", type=int, default=10, help="records of 200 bytes per batch")
    ap.add_argument("--out", default="bench/results/zone_router_bench.json")
    args = ap.parse_args()

    started = time.monotonic()
    results: dict[str, Any] = {"load_average_before": os.getloadavg(), "rounds": []}
    with ExitStack() as stack:
        s3_url = stack.enter_context(moto_server())
        s3 = boto3.client(
            "s3",
            endpoint_url=s3_url,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        s3.create_bucket(Bucket=BUCKET)
        url = stack.enter_context(temporary_database("tl_zone_router_bench"))
        import tempfile

        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tl-zr-bench-")))
        cluster = TidelakeCluster(root, url, s3_url)
        stack.callback(cluster.stop)
        env = {
            "TIDELAKE_CLUSTER_BALANCER": "false",
            "TIDELAKE_CLUSTER_HEARTBEAT_INTERVAL_MS": "500",
            "TIDELAKE_CLUSTER_SESSION_TIMEOUT_MS": "3000",
            "TIDELAKE_CLUSTER_CONTROLLER_LEASE_MS": "3000",
            "TIDELAKE_CLUSTER_CONTROLLER_INTERVAL_MS": "500",
        }
        for node, rack in RACKS.items():
            cluster.start_node(node, TIDELAKE_BROKER_RACK=rack, **env)
        admin = AdminClient(quiet({"bootstrap.servers": cluster.bootstrap}))
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        hosts = [(h, int(p)) for h, p in (b.rsplit(":", 1) for b in cluster.bootstrap.split(","))]
        rack_a = RoutedProducer(hosts, TOPIC, "a", client_name="bench")
        no_rack = RoutedProducer(hosts, TOPIC, None, client_name="bench")
        deadline = time.monotonic() + 30
        while True:
            try:
                rack_a.start()
                no_rack.start()
                leaders = {p: rack_a.leader(p) for p in range(PARTITIONS)}
                if min(leaders.values()) >= 0:
                    break
            except (OSError, AssertionError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the topic's partitions got no leaders")
            time.sleep(0.5)
        in_b = [p for p in range(PARTITIONS) if RACKS[leaders[p]] == "b"]
        in_a = [p for p in range(PARTITIONS) if RACKS[leaders[p]] == "a"]
        results["leaders"] = leaders
        if not in_b or not in_a:
            raise SystemExit(f"leaders are all in one rack: {leaders}")
        sent: list[Sent] = []
        payload = b"x" * 200
        for r in range(args.rounds):
            lat: dict[str, list[float]] = {g: [] for g in GROUPS}
            for i in range(args.batches):
                values = [b"%d-%d-%d-" % (r, i, j) + payload for j in range(args.records)]
                for p in in_b:
                    s = rack_a.send(p, values)
                    assert s.via != leaders[p], "routed produce went to the leader"
                    lat["routed"].append(s.latency_s * 1000)
                    sent.append(s)
                    s = no_rack.send(p, values)
                    lat["direct, cross-rack"].append(s.latency_s * 1000)
                    sent.append(s)
                for p in in_a:
                    s = rack_a.send(p, values)
                    lat["direct, same rack"].append(s.latency_s * 1000)
                    sent.append(s)
            results["rounds"].append(
                {g: {"p50": pct(v, 0.5), "p99": pct(v, 0.99), "n": len(v)} for g, v in lat.items()}
            )
            print(
                f"round {r + 1}: "
                + ", ".join(
                    f"{g} p50 {pct(v, 0.5):.1f} p99 {pct(v, 0.99):.1f} ms" for g, v in lat.items()
                )
            )
        rack_a.close()
        no_rack.close()
        want = {(s.partition, s.offset + k) for s in sent for k in range(len(s.values))}
        msgs = consume_range(cluster.bootstrap, TOPIC, range(PARTITIONS), len(want), 120)
        got = {(m.partition(), m.offset()) for m in msgs}
        time.sleep(2)
        left = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{cluster.prefix}/router/").get(
            "KeyCount", 0
        )
        results["verify"] = {
            "acked_records": len(want),
            "read": len(msgs),
            "lost_or_misplaced": len(want - got),
            "router_objects_left": left,
            "retried": len(rack_a.errors) + len(no_rack.errors),
        }
    results["wall_s"] = time.monotonic() - started
    results["load_average_after"] = os.getloadavg()
    results["args"] = vars(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    _report(results)
    return 0


def _report(results: dict[str, Any]) -> None:
    rounds = results["rounds"]
    print()
    print(f"{'produce latency (acks=all, one in flight)':<44} {'p50 ms':>8} {'p99 ms':>8}")
    for g in GROUPS:
        p50 = statistics.median(r[g]["p50"] for r in rounds)
        p99 = statistics.median(r[g]["p99"] for r in rounds)
        print(f"{g:<44} {p50:>8.1f} {p99:>8.1f}")
    v = results["verify"]
    print(
        f"medians of {len(rounds)} rounds; acked records {v['acked_records']}, read {v['read']}, "
        f"lost or misplaced {v['lost_or_misplaced']}, router objects left {v['router_objects_left']}, "
        f"retries {v['retried']}; wall {results['wall_s']:.0f} s"
    )


if __name__ == "__main__":
    sys.exit(main())
