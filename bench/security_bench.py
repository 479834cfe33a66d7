"""Security benchmark: produce throughput and p99 over SASL_SSL next to PLAINTEXT.

One ``tidelake serve`` with a PLAINTEXT and a SASL_SSL (SCRAM-SHA-512, TLS
with a throwaway CA) listener; confluent-kafka produces (1 KiB, acks=all,
lz4, idempotent) through each in alternating rounds in the same run, then at
a fixed rate for latency. Prints a table and writes bench/results/security.json.

    python -m bench.security_bench [--messages 150000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integration.security.certs import make_pki  # noqa: E402
from tests.support.net import free_port  # noqa: E402
from tests.support.platform import TidelakeProcess  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parents[1]


def _producer(conf: dict[str, Any], linger_ms: int) -> Producer:
    return Producer(
        {
            **conf,
            "acks": "all",
            "compression.type": "lz4",
            "linger.ms": linger_ms,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "enable.idempotence": True,
            "log_level": 0,
        }
    )


def throughput(conf: dict[str, Any], topic: str, n: int, size: int) -> dict[str, float]:
    p = _producer(conf, 5)
    payload = os.urandom(size // 2).hex().encode()[:size]
    errors = 0

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal errors
        if err is not None:
            errors += 1

    p.list_topics(topic, timeout=30)  # connected and authenticated before the clock starts
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
    return {"mb_per_s": n * size / elapsed / 1e6, "seconds": elapsed, "errors": errors}


def latency(conf: dict[str, Any], topic: str, rate_mb: float, seconds: float, size: int) -> dict[str, float]:
    p = _producer(conf, 1)
    payload = os.urandom(size // 2).hex().encode()[:size]
    per_s = rate_mb * 1e6 / size
    lat: list[float] = []
    lock = threading.Lock()

    def make_cb(t0: float):  # noqa: ANN202
        def cb(err: object, _msg: object) -> None:
            if err is None:
                with lock:
                    lat.append(time.perf_counter() - t0)

        return cb

    p.list_topics(topic, timeout=30)
    start = time.perf_counter()
    sent = 0
    while time.perf_counter() - start < seconds:
        due = int((time.perf_counter() - start) * per_s)
        while sent < due:
            p.produce(topic, payload, on_delivery=make_cb(time.perf_counter()))
            sent += 1
        p.poll(0)
        time.sleep(0.0005)
    p.flush(60)
    lat.sort()
    q = statistics.quantiles(lat, n=100)
    return {"p50_ms": q[49] * 1000, "p99_ms": q[98] * 1000, "messages": sent}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=150_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--latency-rate-mb", type=float, default=20.0)
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pki = make_pki(root / "pki")
        data = root / "data"
        data.mkdir()
        subprocess.run(
            [sys.executable, "-m", "api.cli", "users", "create", "bench", "--password", "bench-pw",
             "--data-dir", str(data)],
            check=True, cwd=REPO, capture_output=True,
        )
        proc = TidelakeProcess(data, env={"TIDELAKE_LOG_LEVEL": "WARNING"})
        sasl_port = free_port()
        config = root / "tidelake.toml"
        config.write_text(
            f'[broker]\nlisteners = ["PLAINTEXT://127.0.0.1:{proc.kafka_port}", '
            f'"SASL_SSL://127.0.0.1:{sasl_port}"]\n'
            f'ssl_certfile = "{pki.server_cert}"\nssl_keyfile = "{pki.server_key}"\n'
        )
        proc.config_file = config
        confs = {
            "PLAINTEXT": {"bootstrap.servers": proc.bootstrap},
            "SASL_SSL": {
                "bootstrap.servers": f"127.0.0.1:{sasl_port}",
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "bench",
                "sasl.password": "bench-pw",
                "ssl.ca.location": str(pki.ca),
            },
        }
        proc.start()
        results: dict[str, Any] = {name: {"throughput": [], "latency": None} for name in confs}
        try:
            admin = AdminClient({"bootstrap.servers": proc.bootstrap, "log_level": 0})
            topics = [f"bench-{n.lower()}-{r}" for n in confs for r in range(args.rounds)]
            topics += [f"lat-{n.lower()}" for n in confs]
            created = admin.create_topics([NewTopic(t, args.partitions, 1) for t in topics])
            for future in created.values():
                future.result(30)
            for r in range(args.rounds):  # alternate, so drift hits both alike
                for name, conf in confs.items():
                    res = throughput(conf, f"bench-{name.lower()}-{r}", args.messages, args.size)
                    results[name]["throughput"].append(res)
            for name, conf in confs.items():
                results[name]["latency"] = latency(
                    conf, f"lat-{name.lower()}", args.latency_rate_mb, args.latency_seconds, args.size
                )
        finally:
            proc.stop()
    plain = statistics.median(r["mb_per_s"] for r in results["PLAINTEXT"]["throughput"])
    secure = statistics.median(r["mb_per_s"] for r in results["SASL_SSL"]["throughput"])
    print(f"{'listener':<12} {'produce MB/s (median)':>22} {'rounds':>28} {'p50 ms':>8} {'p99 ms':>8}")
    for name in confs:
        rounds = ", ".join(f"{r['mb_per_s']:.1f}" for r in results[name]["throughput"])
        med = statistics.median(r["mb_per_s"] for r in results[name]["throughput"])
        lat = results[name]["latency"]
        print(f"{name:<12} {med:>22.1f} {rounds:>28} {lat['p50_ms']:>8.2f} {lat['p99_ms']:>8.2f}")
    ratio = secure / plain
    print(f"SASL_SSL / PLAINTEXT throughput: {ratio:.2f} (target >= 0.70)")
    RESULTS.mkdir(exist_ok=True)
    out = {"args": vars(args), "load_avg": os.getloadavg(), "ratio": ratio, "results": results}
    (RESULTS / "security.json").write_text(json.dumps(out, indent=2))
    return 0 if ratio >= 0.7 else 1


if __name__ == "__main__":
    sys.exit(main())
