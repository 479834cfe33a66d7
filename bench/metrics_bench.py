"""Cost of the metrics: the Kafka request observer per request, next to a
no-op observer and to the mean Produce handling time of a running platform
under load, and the /metrics scrape time with many partitions, next to /healthz.

    python -m bench.metrics_bench [--topics 100] [--partitions 6]

Prints a table and writes bench/results/metrics_bench.json.
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
from types import SimpleNamespace
from typing import Any

import httpx
from prometheus_client import CollectorRegistry

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from api.metrics.kafka import KafkaRequestMetrics  # noqa: E402
from ingest.protocol.records import build_batch  # noqa: E402
from tests.support.platform import TidelakeProcess  # noqa: E402


def _per_call_us(fn: Any, args: tuple[Any, ...], n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        fn(*args)
    return (time.perf_counter() - started) / n * 1e6


def observer_cost(n: int) -> dict[str, float]:
    batch = build_batch([(b"key", b"x" * 1024, [], 0)] * 100)
    request = SimpleNamespace(
        topic_data=(
            SimpleNamespace(name="t", partition_data=(SimpleNamespace(index=0, records=batch),)),
        )
    )
    response = SimpleNamespace(
        responses=(
            SimpleNamespace(
                name="t", partition_responses=(SimpleNamespace(index=0, error_code=0),)
            ),
        )
    )
    fetch = SimpleNamespace(
        responses=(
            SimpleNamespace(
                topic="t",
                partitions=tuple(
                    SimpleNamespace(partition_index=i, error_code=0, records=batch)
                    for i in range(6)
                ),
            ),
        )
    )
    metrics = KafkaRequestMetrics(CollectorRegistry(), lambda _id: None)

    def noop(*_args: Any) -> None:
        return None

    return {
        "noop_observer_us": _per_call_us(noop, (0, 0.001, request, response), n),
        "produce_observe_us": _per_call_us(metrics.observe, (0, 0.001, request, response), n),
        "fetch6_observe_us": _per_call_us(metrics.observe, (1, 0.001, None, fetch), n),
    }


def platform_figures(topics: int, partitions: int, messages: int) -> dict[str, float]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    with tempfile.TemporaryDirectory() as tmp, TidelakeProcess(Path(tmp) / "data") as p:
        admin = AdminClient({"bootstrap.servers": p.bootstrap, "log_level": 0})
        names = [f"t{i:03d}" for i in range(topics)]
        for f in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
            f.result(60)
        producer = Producer(
            {"bootstrap.servers": p.bootstrap, "linger.ms": 5, "acks": "all", "log_level": 0}
        )
        value = b"x" * 1024
        started = time.perf_counter()
        for i in range(messages):
            producer.produce(names[i % topics], value=value)
            if i % 10_000 == 0:
                producer.poll(0)
        producer.flush(120)
        produce_s = time.perf_counter() - started
        text = httpx.get(f"{p.http_url}/metrics", timeout=30).text
        total = count = 0.0
        for line in text.splitlines():
            if line.startswith('tidelake_kafka_request_seconds_sum{api="produce"}'):
                total = float(line.split()[-1])
            if line.startswith('tidelake_kafka_request_seconds_count{api="produce"}'):
                count = float(line.split()[-1])

        def timed(path: str) -> list[float]:
            out = []
            with httpx.Client(timeout=30) as client:
                for _ in range(30):
                    t0 = time.perf_counter()
                    client.get(p.http_url + path).raise_for_status()
                    out.append((time.perf_counter() - t0) * 1000)
            return out

        scrape = timed("/metrics")
        health = timed("/healthz")
        return {
            "produce_mb_per_s": messages * len(value) / produce_s / 1e6,
            "produce_requests": count,
            "produce_handling_mean_us": total / count * 1e6 if count else 0.0,
            "metrics_bytes": float(len(text)),
            "scrape_p50_ms": statistics.median(scrape),
            "scrape_max_ms": max(scrape),
            "healthz_p50_ms": statistics.median(health),
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--calls", type=int, default=100_000)
    args = ap.parse_args()
    result: dict[str, Any] = {"load_average": os.getloadavg()[0], **vars(args)}
    result |= observer_cost(args.calls)
    result |= platform_figures(args.topics, args.partitions, args.messages)
    share = result["produce_observe_us"] / max(result["produce_handling_mean_us"], 1e-9)
    result["observer_share_of_produce"] = share
    rows = [
        ("no-op observer call", f"{result['noop_observer_us']:.2f} us"),
        ("observe(): Produce, 1 partition, 100 records", f"{result['produce_observe_us']:.2f} us"),
        ("observe(): Fetch, 6 partitions", f"{result['fetch6_observe_us']:.2f} us"),
        (
            "Produce handling, mean (platform, acks=all)",
            f"{result['produce_handling_mean_us']:.0f} us",
        ),
        ("observer / Produce handling", f"{share * 100:.2f} %"),
        ("produce throughput during the run", f"{result['produce_mb_per_s']:.0f} MB/s"),
        (
            f"/metrics, {args.topics} topics x {args.partitions} partitions",
            f"p50 {result['scrape_p50_ms']:.1f} ms, max {result['scrape_max_ms']:.1f} ms, "
            f"{result['metrics_bytes'] / 1024:.0f} KiB",
        ),
        ("/healthz (baseline)", f"p50 {result['healthz_p50_ms']:.1f} ms"),
        ("load average (1 min) at start", f"{result['load_average']:.2f}"),
    ]
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    out = REPO / "bench" / "results" / "metrics_bench.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
