"""Transactions benchmark: read_committed fetch next to read_uncommitted, and
the transactional producer (commit every 100 ms) next to an idempotent one.

Starts ``tidelake serve`` on free loopback ports with a fresh data directory
and drives it with confluent-kafka (librdkafka). One topic is filled by a
transactional producer that commits every 100 ms, another by an idempotent
producer, with the same 1 KiB messages; then each topic is read from the start
by fresh consumers, read_committed and read_uncommitted in alternating rounds.
Prints a table and writes bench/results/txn_fetch.json.

    python -m bench.txn_fetch_bench [--messages 400000] [--rounds 5] [--commit-every-ms 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.platform import TidelakeProcess  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
_PARTITIONS = 6


def _create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(name, _PARTITIONS, 1)])[name].result(30)


def _produce(
    producer: Producer, topic: str, n: int, value: bytes, commit_every_s: float | None
) -> dict[str, float]:
    """Send ``n`` messages; with ``commit_every_s``, inside transactions committed that often."""
    transactions = 0
    start = time.perf_counter()
    if commit_every_s is not None:
        producer.begin_transaction()
        began = start
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value, key=b"%d" % i)
                break
            except BufferError:
                producer.poll(0.01)
        if commit_every_s is not None:
            now = time.perf_counter()
            if now - began >= commit_every_s:
                producer.commit_transaction(60)
                transactions += 1
                producer.begin_transaction()
                began = time.perf_counter()
    if commit_every_s is not None:
        producer.commit_transaction(60)
        transactions += 1
    else:
        if producer.flush(60) != 0:
            raise RuntimeError("messages left unsent")
    elapsed = time.perf_counter() - start
    return {
        "messages": n,
        "seconds": elapsed,
        "mb_per_s": n * len(value) / elapsed / 1e6,
        "msgs_per_s": n / elapsed,
        "transactions": transactions,
    }


def _consume(bootstrap: str, topic: str, n: int, isolation: str) -> dict[str, float]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{time.time()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "log_level": 0,
        }
    )
    c.subscribe([topic])
    got = nbytes = 0
    start: float | None = None
    deadline = time.perf_counter() + 180
    while got < n and time.perf_counter() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                if start is None:
                    start = time.perf_counter()
                got += 1
                nbytes += len(m.value() or b"")
    elapsed = time.perf_counter() - (start or time.perf_counter())
    c.close()
    if got < n:
        raise RuntimeError(f"{isolation} read {got} of {n} messages of {topic}")
    return {
        "messages": got,
        "seconds": elapsed,
        "mb_per_s": nbytes / elapsed / 1e6 if elapsed else 0.0,
    }


async def _broker_side(batches: int, rounds: int) -> dict[str, list[float]]:
    """The broker's own read path, without a client or a socket: a partition
    log over the in-memory engine holding transactions of 4 producers (one
    in ten aborted), read from the start in 1 MiB reads, read_committed (with
    the aborted list a Fetch response carries) and read_uncommitted in
    alternating rounds. MB/s of record batches returned."""
    from ingest.log.partition import PartitionLog
    from ingest.log.topic_config import TopicConfigRegistry
    from ingest.protocol.records import build_batch
    from ingest.s3stream import MemoryStreamEngine

    engine = MemoryStreamEngine()
    await engine.start()
    cfg = TopicConfigRegistry.default().resolved({})
    log = PartitionLog("bench", 0, await engine.create_stream(), lambda: cfg)
    seqs = [0, 0, 0, 0]
    for i in range(batches):
        pid = i % 4
        records = [(None, b"x" * 1000, [], 1_700_000_000_000)] * 10
        data = build_batch(
            records, producer_id=pid, producer_epoch=0, base_sequence=seqs[pid], attributes=0x10
        )
        seqs[pid] += 10
        out = log.append(data)
        assert out.durable is not None
        await out.durable
        if i % 20 >= 16:  # every producer ends its transaction after 5 of its batches
            marker = log.write_marker(pid, 0, i % 200 >= 20, 0)  # one in ten aborted
            assert marker.durable is not None
            await marker.durable
    out_rounds: dict[str, list[float]] = {"read_committed": [], "read_uncommitted": []}
    end = log.last_stable_offset
    for _ in range(rounds):
        for mode in ("read_committed", "read_uncommitted"):
            committed = mode == "read_committed"
            offset = nbytes = 0
            started = time.perf_counter()
            while offset < end:
                res = await log.read(offset, 1 << 20, read_committed=committed)
                assert res.records
                last = res.records
                pos = 0
                while pos < len(last):  # the next offset: after the last batch returned
                    base, length = (
                        int.from_bytes(last[pos : pos + 8], "big"),
                        int.from_bytes(last[pos + 8 : pos + 12], "big"),
                    )
                    delta = int.from_bytes(last[pos + 23 : pos + 27], "big")
                    pos += 12 + length
                if committed:
                    log.aborted_transactions(offset, base + delta + 1)
                offset = base + delta + 1
                nbytes += len(last)
            out_rounds[mode].append(nbytes / (time.perf_counter() - started) / 1e6)
    await engine.close()
    return out_rounds


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--messages", type=int, default=400_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--commit-every-ms", type=float, default=100.0)
    ap.add_argument("--broker-batches", type=int, default=20_000)
    args = ap.parse_args()
    broker_side = asyncio.run(_broker_side(args.broker_batches, args.rounds))
    value = os.urandom(args.size // 2).hex().encode()[: args.size]
    load_before = os.getloadavg()[0]
    reads: dict[str, list[float]] = {
        "committed, read_committed": [],
        "committed, read_uncommitted": [],
    }
    reads["idempotent, read_uncommitted"] = []
    with tempfile.TemporaryDirectory() as tmp:
        proc = TidelakeProcess(Path(tmp) / "data", env={"TIDELAKE_LOG_LEVEL": "WARNING"}).start()
        try:
            bs = proc.bootstrap
            _create_topic(bs, "txn")
            _create_topic(bs, "idem")
            common: dict[str, Any] = {"bootstrap.servers": bs, "linger.ms": 5, "log_level": 0}
            common["compression.type"] = "lz4"
            idem = Producer({**common, "enable.idempotence": True})
            txn = Producer({**common, "transactional.id": "bench-txn"})
            txn.init_transactions(60)
            # alternate the two producers' runs so that load changes hit both alike
            half = args.messages // 2
            produced = {"idempotent": [], "transactional": []}  # type: dict[str, list[dict[str, float]]]
            for _ in range(2):
                produced["idempotent"].append(_produce(idem, "idem", half, value, None))
                produced["transactional"].append(
                    _produce(txn, "txn", half, value, args.commit_every_ms / 1000)
                )
            n = half * 2
            for _ in range(args.rounds):
                reads["committed, read_committed"].append(
                    _consume(bs, "txn", n, "read_committed")["mb_per_s"]
                )
                reads["committed, read_uncommitted"].append(
                    _consume(bs, "txn", n, "read_uncommitted")["mb_per_s"]
                )
                reads["idempotent, read_uncommitted"].append(
                    _consume(bs, "idem", n, "read_uncommitted")["mb_per_s"]
                )
        except KafkaException as exc:
            print(f"failed: {exc}\n{proc.log_tail()}", file=sys.stderr)
            return 1
        finally:
            proc.stop()
    produce = {
        k: sum(r["messages"] for r in v) * args.size / sum(r["seconds"] for r in v) / 1e6
        for k, v in produced.items()
    }
    median = {k: statistics.median(v) for k, v in reads.items()}
    result = {
        "benchmark": "txn_fetch",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine_cores": os.cpu_count(),
        "load_average": [load_before, os.getloadavg()[0]],
        "messages": n,
        "size": args.size,
        "produce_mb_per_s": produce,
        "transactions": sum(r["transactions"] for r in produced["transactional"]),
        "commit_every_ms": args.commit_every_ms,
        "consume_mb_per_s_rounds": reads,
        "consume_mb_per_s_median": median,
        "broker_read_mb_per_s_rounds": broker_side,
        "ratios": {
            "read_committed / read_uncommitted (same topic)": median["committed, read_committed"]
            / median["committed, read_uncommitted"],
            "read_committed / non-transactional read": median["committed, read_committed"]
            / median["idempotent, read_uncommitted"],
            "transactional / idempotent produce": produce["transactional"] / produce["idempotent"],
            "broker read path read_committed / read_uncommitted": statistics.median(
                broker_side["read_committed"]
            )
            / statistics.median(broker_side["read_uncommitted"]),
        },
        "target": 0.8,
    }
    print(
        f"{n:,} messages of {args.size} B, {_PARTITIONS} partitions, {result['transactions']} "
        f"transactions (commit every {args.commit_every_ms:g} ms), load {load_before:.1f}"
    )
    print(f"{'measure':48} {'MB/s (median)':>14}  rounds")
    for k, v in reads.items():
        print(f"{'consume ' + k:48} {median[k]:>14.1f}  {', '.join(f'{x:.0f}' for x in v)}")
    for k, v in broker_side.items():
        print(
            f"{'broker read path ' + k:48} {statistics.median(v):>14.1f}  {', '.join(f'{x:.0f}' for x in v)}"
        )
    for k, v2 in produce.items():
        print(f"{'produce ' + k:48} {v2:>14.1f}")
    for k, r in result["ratios"].items():  # type: ignore[attr-defined]
        print(f"{k:48} {r:>14.2f}  target >= 0.8")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "txn_fetch.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
