"""Broker benchmark: produce throughput, produce latency at a fixed rate, consume throughput.

Starts ``tidelake serve`` on free loopback ports with a fresh data directory
(fsync'd file WAL, local-directory object store) and drives it with
confluent-kafka (librdkafka). Prints a table and writes bench/results/broker.json.

    python -m bench.broker_bench [--messages 300000] [--size 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.platform import TidelakeProcess  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def _create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def _warm_up(p: Producer, topic: str, payload: bytes) -> float:
    """Deliver one message before the clock starts; returns how long it took (ms).

    A new producer's first message waits for its connection and producer id.
    librdkafka 2.10 and later drop the bootstrap connection once Metadata
    names the brokers; an idempotent producer that finds no broker up at
    that moment asks for its producer id again on a 500 ms timer, whichever
    broker it talks to. That is start-up, reported as ``first_message_ms``,
    not the steady throughput or latency these runs measure.
    """
    first: list[float] = []
    t0 = time.perf_counter()
    p.produce(topic, payload, on_delivery=lambda _err, _m: first.append(time.perf_counter() - t0))
    p.flush(30)
    return first[0] * 1000 if first else -1.0


class ClientStats:
    """What librdkafka itself saw of the broker during a run: its statistics
    (``statistics.interval.ms``), one window per ``interval_ms``, for the broker that
    led the partitions: the round trip of its Produce requests (``rtt``) and
    how long messages waited in the producer's queue before a request took
    them (``int_latency``), in microseconds. Only the windows in which
    requests were sent count; ``summary`` gives the mean over windows of each
    window's p50 and p99 (librdkafka resets its histograms every window, so
    quantiles cannot be merged exactly)."""

    def __init__(self, interval_ms: int = 1000) -> None:
        self.interval_ms = interval_ms
        self.windows: list[dict[str, float]] = []

    def config(self) -> dict[str, object]:
        return {"statistics.interval.ms": self.interval_ms, "stats_cb": self._on_stats}

    def _on_stats(self, text: str) -> None:
        stats = json.loads(text)
        for broker in stats.get("brokers", {}).values():
            if broker.get("nodeid", -1) < 0 or not broker.get("rtt", {}).get("cnt"):
                continue
            rtt, wait = broker["rtt"], broker["int_latency"]
            self.windows.append({
                "requests": float(rtt["cnt"]),
                "rtt_p50_us": float(rtt["p50"]), "rtt_p99_us": float(rtt["p99"]),
                "queue_p50_us": float(wait["p50"]), "queue_p99_us": float(wait["p99"]),
            })

    def summary(self) -> dict[str, float]:
        if not self.windows:
            return {}
        keys = ("rtt_p50_us", "rtt_p99_us", "queue_p50_us", "queue_p99_us")
        out = {k: statistics.fmean(w[k] for w in self.windows) for k in keys}
        out["windows"] = float(len(self.windows))
        out["requests"] = sum(w["requests"] for w in self.windows)
        return out


def produce_throughput(
    bootstrap: str, topic: str, n: int, size: int, extra: dict[str, object] | None = None,
    *, client_stats: ClientStats | None = None,
) -> dict[str, float]:
    p = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "compression.type": "lz4", "linger.ms": 5,
        "batch.size": 1_000_000, "queue.buffering.max.kbytes": 1_048_576, "log_level": 0,
        "queue.buffering.max.messages": 2_000_000,
        "enable.idempotence": True, **(extra or {}),
        **(client_stats.config() if client_stats is not None else {}),
    })
    payload = os.urandom(size // 2).hex().encode()[:size]  # compressible like text, not trivially
    errors = 0

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal errors
        if err is not None:
            errors += 1

    first_ms = _warm_up(p, topic, payload)
    if client_stats is not None:
        client_stats.windows.clear()  # the warm-up's window is start-up, not the run
    start = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, payload, key=str(i % 1000).encode(), on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.005)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(120)
    elapsed = time.perf_counter() - start
    return {
        "messages": n, "message_bytes": size, "seconds": elapsed, "errors": errors,
        "mb_per_s": n * size / elapsed / 1e6, "msgs_per_s": n / elapsed,
        "first_message_ms": first_ms,
    }


def produce_latency(
    bootstrap: str, topic: str, rate_mb: float, seconds: float, size: int,
    extra: dict[str, object] | None = None, *, distinct: bool = False,
    client_stats: ClientStats | None = None,
) -> dict[str, float]:
    """Paced produce latency. Every message carries the same text payload
    (which lz4 shrinks about 25 times within a batch), or with ``distinct``
    its own random bytes (incompressible: the disk sees the full rate)."""
    p = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "compression.type": "lz4", "linger.ms": 1,
        "log_level": 0, "enable.idempotence": True, **(extra or {}),
        **(client_stats.config() if client_stats is not None else {}),
    })
    payload = os.urandom(size // 2).hex().encode()[:size]
    pool = os.urandom(max(size, int(rate_mb * 1e6 * seconds) + size)) if distinct else b""
    per_s = rate_mb * 1e6 / size
    latencies: list[float] = []
    lock = threading.Lock()

    def make_cb(t0: float):  # noqa: ANN202
        def cb(err: object, _msg: object) -> None:
            if err is None:
                with lock:
                    latencies.append(time.perf_counter() - t0)
        return cb

    first_ms = _warm_up(p, topic, payload)
    if client_stats is not None:
        client_stats.windows.clear()
    start = time.perf_counter()
    sent = 0
    while True:
        now = time.perf_counter()
        if now - start >= seconds:
            break
        due = int((now - start) * per_s)
        while sent < due:
            value = pool[sent * size : (sent + 1) * size] if distinct else payload
            p.produce(topic, value, on_delivery=make_cb(time.perf_counter()))
            sent += 1
        p.poll(0)
        time.sleep(0.0005)
    p.flush(60)
    elapsed = time.perf_counter() - start
    lat = sorted(latencies)
    q = statistics.quantiles(lat, n=100) if len(lat) > 100 else [max(lat)] * 99
    return {
        "target_mb_per_s": rate_mb, "achieved_mb_per_s": sent * size / elapsed / 1e6, "messages": sent,
        "p50_ms": q[49] * 1000, "p99_ms": q[98] * 1000, "max_ms": lat[-1] * 1000,
        "first_message_ms": first_ms,
    }


def consume_throughput(bootstrap: str, topic: str, n: int) -> dict[str, float]:
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{time.time()}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760,
        "log_level": 0,
    })
    c.subscribe([topic])
    got = 0
    nbytes = 0
    start = None
    deadline = time.perf_counter() + 180
    while got < n and time.perf_counter() < deadline:
        msgs = c.consume(10000, 1.0)
        for m in msgs:
            if m.error() is None:
                if start is None:
                    start = time.perf_counter()
                got += 1
                nbytes += len(m.value())
    elapsed = time.perf_counter() - (start or time.perf_counter())
    c.close()
    return {"messages": got, "seconds": elapsed, "mb_per_s": nbytes / elapsed / 1e6 if elapsed else 0,
            "msgs_per_s": got / elapsed if elapsed else 0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--latency-rate-mb", type=float, default=20.0)
    ap.add_argument("--latency-seconds", type=float, default=15.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc = TidelakeProcess(Path(tmp) / "data", env={"TIDELAKE_LOG_LEVEL": "WARNING"}).start()
        try:
            _create_topic(proc.bootstrap, "bench-throughput", args.partitions)
            _create_topic(proc.bootstrap, "bench-latency", args.partitions)
            produce = produce_throughput(proc.bootstrap, "bench-throughput", args.messages, args.size)
            latency = produce_latency(proc.bootstrap, "bench-latency", args.latency_rate_mb,
                                      args.latency_seconds, args.size)
            consume = consume_throughput(proc.bootstrap, "bench-throughput", args.messages)
        finally:
            proc.stop()
    result = {
        "benchmark": "broker", "machine_cores": os.cpu_count(), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "produce_acks_all_lz4": produce, "produce_latency_fixed_rate": latency, "consume": consume,
        "targets": {"produce_mb_per_s": 150, "p99_ms_at_20mb_s": 10},
    }
    rows = [
        ("produce acks=all lz4 1 KiB", f"{produce['mb_per_s']:.1f} MB/s", f"{produce['msgs_per_s']:,.0f} msg/s", ">= 150 MB/s"),
        (f"produce latency at {latency['target_mb_per_s']:.0f} MB/s", f"p50 {latency['p50_ms']:.2f} ms",
         f"p99 {latency['p99_ms']:.2f} ms", "p99 <= 10 ms"),
        ("consume from earliest", f"{consume['mb_per_s']:.1f} MB/s", f"{consume['msgs_per_s']:,.0f} msg/s", ""),
    ]
    print(f"{'measure':34} {'value':>16} {'':>18}  target")
    for r in rows:
        print(f"{r[0]:34} {r[1]:>16} {r[2]:>18}  {r[3]}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "broker.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
