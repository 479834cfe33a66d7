"""Object-WAL acknowledgement latency on a flaky S3: the WAL put policy before
and after (issue #14, item 9), in one run under the same faults.

Starts moto's S3 server and, for each policy, a fresh fault proxy in front of
it (``tests/support/s3_fault_proxy.py``, the same seed): 20 % of requests
answered ``503 SlowDown``, 20 % delayed by 200 ms. Policies:

- ``before``: WAL puts through the store's own retries (botocore standard
  mode: ``rand x 1, 2, 4, 8 s`` after a 503), then the WAL's backoff from
  100 ms; no hedging (``WalPutPolicy.store_backoff()``).
- ``after``: one attempt per store call, retried at once then after
  50-250 ms, and a second identical put after ``hedge_after_s``
  (``WalPutPolicy()``).

Levels (``--level``):

- ``wal``: the object WAL alone on an ``S3ObjectStore`` (the broker's WAL
  settings): appends of 1 KiB at a fixed rate; latency from ``append`` to
  its acknowledgement.
- ``broker``: ``tidelake serve`` with the object WAL behind the proxy and a
  confluent-kafka producer (acks=all, idempotent, 1 KiB, fixed rate):
  latency from ``produce`` to the delivery report. The ``before`` broker
  runs with a ``sitecustomize`` that swaps the policy in (bench only).

Prints a table and writes JSON to ``bench/results/s3_faults.json``.

    python bench/s3_faults_bench.py                  # both levels, 30 s each
    python bench/s3_faults_bench.py --level wal --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.s3stream_bench import BUCKET, _start_moto  # noqa: E402
from ingest.s3stream.objectstore.retry import WalPutPolicy  # noqa: E402
from ingest.s3stream.objectstore.s3 import S3ObjectStore  # noqa: E402
from ingest.s3stream.wal import ObjectWriteAheadLog  # noqa: E402
from tests.support.s3_fault_proxy import S3FaultProxy  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
POLICIES = {"before": WalPutPolicy.store_backoff(), "after": WalPutPolicy()}
_BEFORE_SITE = """\
# bench/s3_faults_bench.py: run the broker with the earlier WAL put policy
import ingest.s3stream.wal.object as _wal
from ingest.s3stream.objectstore.retry import WalPutPolicy as _Policy

_wal.WalPutPolicy = lambda **_: _Policy.store_backoff()  # type: ignore[assignment]
"""


def _pct(lat: list[float], p: float) -> float:
    s = sorted(lat)
    return s[min(len(s) - 1, int(p / 100 * len(s)))] if s else float("nan")


def _summary(lat_s: list[float]) -> dict[str, float]:
    ms = [x * 1000 for x in lat_s]
    return {
        "count": len(ms),
        "p50_ms": _pct(ms, 50),
        "p90_ms": _pct(ms, 90),
        "p99_ms": _pct(ms, 99),
        "max_ms": max(ms) if ms else float("nan"),
        "over_1s": sum(1 for x in ms if x > 1000),
    }


def _s3(endpoint: str, prefix: str) -> S3ObjectStore:
    return S3ObjectStore(
        BUCKET,
        prefix,
        endpoint_url=endpoint,
        region="us-east-1",
        access_key_id="test",
        secret_access_key="test",
        path_style=True,
    )


async def _wal_run(
    endpoint: str, policy: WalPutPolicy, seconds: float, rate: int
) -> dict[str, Any]:
    store = _s3(endpoint, f"bench-{uuid.uuid4().hex}")
    wal = ObjectWriteAheadLog(store, "wal/", put_policy=policy)  # the broker's defaults
    await wal.start()
    latencies: list[float] = []
    payload = os.urandom(1024)
    loop = asyncio.get_running_loop()

    def done_at(sent: float) -> Any:
        return lambda _f: latencies.append(loop.time() - sent)

    tick = 0.005
    per_tick = max(1, round(rate * tick))
    start = loop.time()
    n = 0
    waits = []
    while loop.time() - start < seconds:
        for _ in range(per_tick):
            h = wal.append(1, n, 1, payload)
            h.done.add_done_callback(done_at(loop.time()))
            waits.append(h.done)
            n += 1
        await asyncio.sleep(max(0.0, start + (n / per_tick) * tick - loop.time()))
    await asyncio.wait_for(asyncio.gather(*waits), 120)
    await asyncio.sleep(0.1)  # the latency callbacks run after the futures resolve
    out = {
        **_summary(latencies),
        "wal_puts": wal.puts,
        "put_retries": wal.put_retries,
        "put_hedges": wal.put_hedges,
    }
    await wal.close()
    await store.close()
    return out


def _broker_run(endpoint: str, name: str, seconds: float, rate: int, base: Path) -> dict[str, Any]:
    from confluent_kafka import Producer

    from tests.integration.broker.conftest import create_topic, quiet
    from tests.integration.storage.conftest import storage_env
    from tests.support.platform import TidelakeProcess

    env = storage_env(endpoint, uuid.uuid4().hex, base / f"{name}-meta.db", "object")
    env["TIDELAKE_OBJECT_STORE_URL"] = f"s3://{BUCKET}/{uuid.uuid4().hex}"  # the bench's bucket
    if name == "before":
        site = base / "before-site"
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text(textwrap.dedent(_BEFORE_SITE))
        env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO)])
    broker = TidelakeProcess(base / f"{name}-data", env=env).start()
    lat: list[float] = []
    failed = 0
    lock = threading.Lock()
    try:
        create_topic(broker.bootstrap, "faults", partitions=3)

        def delivered(err: Any, msg: Any) -> None:
            nonlocal failed
            with lock:
                if err is None:
                    lat.append(msg.latency())
                else:
                    failed += 1

        producer = Producer(
            quiet(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 1,
                    "message.timeout.ms": 120_000,
                }
            )
        )
        payload = os.urandom(1024)
        tick = 0.005
        per_tick = max(1, round(rate * tick))
        start = time.monotonic()
        n = 0
        while time.monotonic() - start < seconds:
            for _ in range(per_tick):
                producer.produce("faults", value=payload, on_delivery=delivered)
                n += 1
            producer.poll(0)
            time.sleep(max(0.0, start + (n / per_tick) * tick - time.monotonic()))
        left = producer.flush(150)
        return {**_summary(lat), "sent": n, "failed": failed, "unacked": left}
    finally:
        broker.stop(timeout=60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--level", choices=["wal", "broker", "both"], default="both")
    ap.add_argument("--policy", choices=["before", "after", "both"], default="both")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--rate", type=int, default=1000, help="appends (records) per second")
    ap.add_argument("--fail", type=float, default=0.2)
    ap.add_argument("--slow", type=float, default=0.2)
    ap.add_argument("--delay", type=float, default=0.2)
    ap.add_argument(
        "--hedge-ms", type=float, default=None, help="the after policy's hedge delay (wal level)"
    )
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "s3_faults.json")
    args = ap.parse_args()
    if args.hedge_ms is not None:
        POLICIES["after"] = WalPutPolicy(hedge_after_s=args.hedge_ms / 1000 or None)
    levels = ["wal", "broker"] if args.level == "both" else [args.level]
    names = ["before", "after"] if args.policy == "both" else [args.policy]
    moto, url = _start_moto()
    rows: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for level in levels:
                for name in names:
                    proxy = S3FaultProxy(url, delay=args.delay).start()
                    try:
                        proxy.set_faults(fail=args.fail, slow=args.slow)
                        if level == "wal":
                            res = asyncio.run(
                                _wal_run(proxy.endpoint, POLICIES[name], args.seconds, args.rate)
                            )
                        else:
                            res = _broker_run(
                                proxy.endpoint, name, args.seconds, args.rate, Path(tmp)
                            )
                        res.update(
                            level=level,
                            policy=name,
                            requests=proxy.requests,
                            injected_503=proxy.failed,
                            delayed=proxy.delayed,
                        )
                    finally:
                        proxy.close()
                    rows.append(res)
                    print(f"{level:6} {name:6} done: {res}", flush=True)
    finally:
        moto.terminate()
        moto.wait(timeout=10)
    print()
    head = f"{'level':6} {'policy':6} {'acks':>7} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} "
    print(head + f"{'max ms':>8} {'>1 s':>5} {'S3 reqs':>8} {'503s':>6}")
    for r in rows:
        print(
            f"{r['level']:6} {r['policy']:6} {r['count']:7d} {r['p50_ms']:8.1f} "
            f"{r['p90_ms']:8.1f} {r['p99_ms']:8.1f} {r['max_ms']:8.1f} {r['over_1s']:5d} "
            f"{r['requests']:8d} {r['injected_503']:6d}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    conditions = {k: v for k, v in vars(args).items() if k != "out"}
    load = os.getloadavg()
    args.out.write_text(
        json.dumps({"conditions": conditions, "loadavg": load, "rows": rows}, indent=2)
    )
    print(f"\nload average {load[0]:.2f}; JSON: {args.out}")


if __name__ == "__main__":
    main()
