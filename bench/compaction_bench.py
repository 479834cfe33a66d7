"""Log compaction benchmark: the cleaner's throughput, and produce throughput
while it runs next to a broker whose cleaner is off.

1. Cleaner (in process, the real S3Stream engine on a directory object
   store, file WAL): a partition filled with ``--mb`` MiB of 1 KiB updates to
   ``--keys`` keys, uploaded; one forced cleaning pass is timed (MB/s of
   batches rewritten). Next to it in the same round, the baseline: reading
   the same range once through the partition log (what any pass must at
   least do).
2. Produce: two ``tidelake serve`` processes, one with the log cleaner
   running every 100 ms, one with it off (``log_cleaner_enable=false``),
   each with a compacted topic (min.cleanable.dirty.ratio=0.01); a
   confluent-kafka producer (acks=all, idempotent, lz4) sends
   ``--messages`` 1 KiB updates to ``--keys`` keys into one, then the other,
   alternating which goes first.

``--rounds`` rounds (default 3); medians. Prints a table and writes
bench/results/compaction.json.

    python -m bench.compaction_bench [--mb 64] [--keys 1000] [--messages 100000] [--rounds 3]
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

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ingest.log.compaction import LogCleaner  # noqa: E402
from ingest.log.partition import PartitionLog  # noqa: E402
from ingest.log.topic_config import TopicConfigRegistry  # noqa: E402
from ingest.metadata import SqliteMetadataStore  # noqa: E402
from ingest.protocol.records import build_batch  # noqa: E402
from ingest.s3stream import S3StreamConfig, open_engine  # noqa: E402
from ingest.s3stream.objectstore import FileObjectStore  # noqa: E402
from tests.support.platform import TidelakeProcess  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
_VALUE = 1024
_PER_BATCH = 100


async def _cleaner_round(mb: int, keys: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="compaction-bench-") as tmp:
        root = Path(tmp)
        metadata = SqliteMetadataStore(root / "meta.db")
        objects = FileObjectStore(root / "objects")
        engine = open_engine(
            # a small log cache: the baseline and the pass both read objects
            S3StreamConfig(wal_dir=root / "wal", upload_interval_ms=200, log_cache_bytes=4 << 20),
            metadata,
            objects,
        )
        await engine.start()
        try:
            registry = TopicConfigRegistry.default()
            cfg = registry.resolved(registry.validate({"cleanup.policy": "compact"}))
            plog = PartitionLog("bench", 0, await engine.create_stream(), lambda: cfg)
            now = int(time.time() * 1000)
            total = mb * 1024 * 1024 // _VALUE
            value = os.urandom(_VALUE // 2).hex().encode()
            pending = []
            for i in range(0, total, _PER_BATCH):
                batch = build_batch(
                    [(b"key-%06d" % ((i + j) % keys), value, [], now) for j in range(_PER_BATCH)]
                )
                out = plog.append(batch)
                assert out.durable is not None, out
                pending.append(out.durable)
                if len(pending) >= 64:
                    await asyncio.gather(*pending)
                    pending = []
            await asyncio.gather(*pending)
            await engine.flush()
            stored = await plog.retained_bytes()
            # baseline: read the range once
            started = time.perf_counter()
            read = 0
            async for _view, h, _ in plog.scan(0):
                read += h.size
            scan_s = time.perf_counter() - started
            cleaner = LogCleaner(lambda: [(plog, cfg)], metadata)
            started = time.perf_counter()
            results = await cleaner.run_once(force=True)
            clean_s = time.perf_counter() - started
            assert results, "no pass"
            res = results[0]
            return {
                "stored_mb": stored / 1e6,
                "rewritten_mb": res.bytes_before / 1e6,
                "after_mb": res.bytes_after / 1e6,
                "clean_s": clean_s,
                "clean_mb_per_s": res.bytes_before / clean_s / 1e6,
                "scan_mb_per_s": read / scan_s / 1e6,
                "records_dropped": res.records_dropped,
            }
        finally:
            await engine.close()
            await objects.close()
            metadata.close()


def _produce(bootstrap: str, topic: str, n: int, keys: int) -> float:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "compression.type": "lz4",
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "log_level": 0,
        }
    )
    value = os.urandom(_VALUE // 2).hex().encode()
    started = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, key=b"key-%06d" % (i % keys))
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(120) != 0:
        raise RuntimeError("messages left unsent")
    return n * _VALUE / (time.perf_counter() - started) / 1e6


def _topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    admin.create_topics(
        [
            NewTopic(
                name,
                1,
                1,
                config={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"},
            )
        ]
    )[name].result(30)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    cleaner_rounds = [asyncio.run(_cleaner_round(args.mb, args.keys)) for _ in range(args.rounds)]

    produce: dict[str, list[float]] = {"cleaner_on": [], "cleaner_off": []}
    with tempfile.TemporaryDirectory(prefix="compaction-bench-") as tmp:
        on = TidelakeProcess(
            Path(tmp) / "on",
            env={
                "TIDELAKE_BROKER_LOG_CLEANER_BACKOFF_MS": "100",
                "TIDELAKE_STORAGE_UPLOAD_INTERVAL_MS": "200",
            },
        ).start()
        off = TidelakeProcess(
            Path(tmp) / "off",
            env={
                "TIDELAKE_BROKER_LOG_CLEANER_ENABLE": "false",
                "TIDELAKE_STORAGE_UPLOAD_INTERVAL_MS": "200",
            },
        ).start()
        try:
            for r in range(args.rounds):
                order = [("cleaner_on", on), ("cleaner_off", off)]
                if r % 2:
                    order.reverse()
                for name, proc in order:
                    topic = f"bench-{name}-{r}"
                    _topic(proc.bootstrap, topic)
                    produce[name].append(_produce(proc.bootstrap, topic, args.messages, args.keys))
            cleaned = on.log_tail(400).count("cleaned bench-")
        finally:
            on.stop()
            off.stop()

    med = statistics.median
    summary: dict[str, Any] = {
        "load_average": os.getloadavg(),
        "args": vars(args),
        "cleaner_rounds": cleaner_rounds,
        "clean_mb_per_s_median": med(r["clean_mb_per_s"] for r in cleaner_rounds),
        "scan_mb_per_s_median": med(r["scan_mb_per_s"] for r in cleaner_rounds),
        "produce_mb_per_s": produce,
        "produce_on_median": med(produce["cleaner_on"]),
        "produce_off_median": med(produce["cleaner_off"]),
        "cleaner_passes_logged": cleaned,
    }
    summary["produce_ratio"] = summary["produce_on_median"] / summary["produce_off_median"]
    print(f"{'measure':<44}{'median':>12}  rounds")
    print(
        f"{'cleaner rewrite MB/s':<44}{summary['clean_mb_per_s_median']:>12.1f}  "
        + ", ".join(f"{r['clean_mb_per_s']:.1f}" for r in cleaner_rounds)
    )
    print(
        f"{'baseline: one read of the range MB/s':<44}{summary['scan_mb_per_s_median']:>12.1f}  "
        + ", ".join(f"{r['scan_mb_per_s']:.1f}" for r in cleaner_rounds)
    )
    r0 = cleaner_rounds[0]
    print(f"{'stored -> after a pass (MB)':<44}{r0['stored_mb']:>8.1f} -> {r0['after_mb']:.2f}")
    for name in ("cleaner_on", "cleaner_off"):
        print(
            f"{'produce MB/s, ' + name:<44}{med(produce[name]):>12.1f}  "
            + ", ".join(f"{v:.1f}" for v in produce[name])
        )
    print(f"{'produce ratio on/off':<44}{summary['produce_ratio']:>12.2f}")
    print(f"{'cleaner passes logged by the on broker':<44}{cleaned:>12}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "compaction.json").write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
