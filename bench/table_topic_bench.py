"""Table topic benchmark: produced -> committed conversion throughput, side by side with a
naive pipeline, freshness at a 1 s commit interval, and files per commit.

    python -m bench.table_topic_bench [--records 1000000] [--partitions 2] [--rounds 3]

It runs ``tidelake serve`` as a real process (free loopback ports, a scratch
data directory), produces a 10-field Avro backlog with confluent-kafka, then:

1. backlog: turns ``table.topic.enable`` on for the backlog topic and times
   until the table's snapshot records every offset (conversion + commits of
   data already in the broker);
2. end to end: a topic created as a table topic; times from the first record
   produced to the commit of the last one (produce and conversion together);
3. naive: a confluent-kafka consumer, fastavro per record, and a pyiceberg
   append per 100k-row batch into a separate SQLite catalog;
4. freshness: a producer at a steady rate into a table topic with a 1 s commit
   interval; a reader polls the catalog every 50 ms; per record, freshness is
   the time its offset first became visible minus its produce timestamp.

Rows 1-3 run ``--rounds`` times on fresh topics; the table shows medians.
Prints a table and writes JSON to ``bench/results/table_topic-<time>.json``.
Not a timed test; the machine is shared, so figures are noisy.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from pyiceberg.catalog.sql import SqlCatalog  # noqa: E402
from pyiceberg.exceptions import NoSuchTableError  # noqa: E402

from tests.support.platform import TidelakeProcess  # noqa: E402

SCHEMA = {
    "type": "record",
    "name": "Trade",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "symbol", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "price", "type": "double"},
        {"name": "buy", "type": "boolean"},
        {"name": "venue", "type": "string"},
        {"name": "ts", "type": "long"},
        {"name": "fee", "type": "float"},
        {"name": "account", "type": "string"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


def _use_logical_ts() -> None:
    """``ts`` as Avro ``timestamp-millis`` (a timestamptz column), as most real schemas have."""
    for f in SCHEMA["fields"]:  # type: ignore[union-attr]
        if f["name"] == "ts":  # type: ignore[index]
            f["type"] = {"type": "long", "logicalType": "timestamp-millis"}  # type: ignore[index]


def _payloads(schema_id: int, count: int) -> list[bytes]:
    parsed = fastavro.parse_schema(SCHEMA)
    prefix = b"\x00" + struct.pack(">I", schema_id)
    out = []
    for i in range(count):
        buf = io.BytesIO()
        fastavro.schemaless_writer(
            buf,
            parsed,
            {
                "id": i,
                "symbol": f"SYM{i % 500}",
                "qty": i % 1000,
                "price": 100 + (i % 997) / 7,
                "buy": i % 2 == 0,
                "venue": "XNAS" if i % 3 else "XLON",
                "ts": 1_700_000_000_000 + i,
                "fee": 0.25,
                "account": f"acct-{i % 10_000:05d}",
                "note": None if i % 5 else "n",
            },
        )
        out.append(prefix + buf.getvalue())
    return out


def _catalog(data_dir: Path, name: str = "tidelake", db: str = "catalog.db") -> SqlCatalog:
    return SqlCatalog(
        name,
        uri=f"sqlite:///{(data_dir / db).resolve().as_posix()}",
        warehouse=(data_dir.resolve() / "warehouse").as_uri(),
    )


def _committed(catalog: SqlCatalog, table: str) -> tuple[dict[int, int], Any]:
    try:
        t = catalog.load_table(("default", table))
    except NoSuchTableError:
        return {}, None
    snap = t.current_snapshot()
    if snap is None or "tidelake.offsets" not in snap.summary.additional_properties:
        return {}, t
    return {
        int(k): v
        for k, v in json.loads(snap.summary.additional_properties["tidelake.offsets"]).items()
    }, t


def _produce(
    bootstrap: str, topic: str, payloads: list[bytes], count: int, partitions: int
) -> float:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "lz4",
        }
    )
    t0 = time.perf_counter()
    n = len(payloads)
    for i in range(count):
        while True:
            try:
                p.produce(topic, payloads[i % n], partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    return time.perf_counter() - t0


def _files_per_commit(table: Any) -> list[int]:
    out = []
    for s in table.snapshots():
        props = s.summary.additional_properties if s.summary else {}
        if "tidelake.offsets" in props and int(props.get("added-records", "0")):
            out.append(int(props.get("added-data-files", "0")))
    return out


TABLE_TOPIC = {
    "table.topic.enable": "true",
    "table.topic.commit.interval.ms": "1000",
    "table.topic.convert.value.type": "by_schema_id",
    "table.topic.transform.value.type": "flatten",
}


def bench_tidelake(
    proc: TidelakeProcess, admin: AdminClient, topic: str, count: int
) -> dict[str, Any]:
    """Conversion of a backlog already in the broker."""
    t0 = time.perf_counter()
    for f in admin.alter_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, topic, set_config=TABLE_TOPIC)]
    ).values():
        f.result(30)
    return _until_committed(proc, topic, count, t0)


def bench_end_to_end(
    proc: TidelakeProcess, admin: AdminClient, payloads: list[bytes], count: int, partitions: int
) -> dict[str, Any]:
    """A table topic from its first produced record to the commit of its last."""
    topic = f"bench-e2e-{time.monotonic_ns()}"
    for f in admin.create_topics([NewTopic(topic, partitions, 1, config=TABLE_TOPIC)]).values():
        f.result(30)
    t0 = time.perf_counter()
    produce_s = _produce(proc.bootstrap, topic, payloads, count, partitions)
    out = _until_committed(proc, topic, count, t0)
    out["produce_seconds"] = round(produce_s, 2)
    return out


def _until_committed(proc: TidelakeProcess, topic: str, count: int, t0: float) -> dict[str, Any]:
    catalog = _catalog(proc.data_dir)
    table = None
    while True:
        offsets, table = _committed(catalog, topic.replace("-", "_"))
        if sum(offsets.values()) >= count:
            break
        if time.perf_counter() - t0 > 900:
            raise TimeoutError(
                f"only {sum(offsets.values())} of {count} committed\n{proc.log_tail()}"
            )
        time.sleep(0.05)
    elapsed = time.perf_counter() - t0
    rows = (
        table.scan().count() if hasattr(table.scan(), "count") else table.scan().to_arrow().num_rows
    )
    files = _files_per_commit(table)
    return {
        "records": count,
        "seconds": round(elapsed, 2),
        "records_per_s": round(count / elapsed),
        "rows_in_table": rows,
        "commits": len(files),
        "files_per_commit_mean": round(statistics.mean(files), 2) if files else None,
        "files_per_commit_max": max(files) if files else None,
    }


def bench_naive(
    proc: TidelakeProcess, topic: str, count: int, partitions: int, scratch: Path
) -> dict[str, Any]:
    (scratch / "warehouse").mkdir(parents=True, exist_ok=True)
    catalog = _catalog(scratch, "naive", "naive.db")
    catalog.create_namespace_if_not_exists("naive")
    parsed = fastavro.parse_schema(SCHEMA)
    arrow_schema = pa.schema(
        [
            ("id", pa.int64()),
            ("symbol", pa.string()),
            ("qty", pa.int32()),
            ("price", pa.float64()),
            ("buy", pa.bool_()),
            ("venue", pa.string()),
            ("ts", pa.int64()),
            ("fee", pa.float32()),
            ("account", pa.string()),
            ("note", pa.string()),
            ("_kafka_partition", pa.int32()),
            ("_kafka_offset", pa.int64()),
        ]
    )
    table = catalog.create_table(("naive", "trades"), schema=arrow_schema)
    c = Consumer(
        {
            "bootstrap.servers": proc.bootstrap,
            "group.id": "naive-bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    t0 = time.perf_counter()
    done = 0
    rows: list[dict[str, Any]] = []
    try:
        while done < count:
            for m in c.consume(10_000, 1.0):
                if m.error():
                    continue
                v = fastavro.schemaless_reader(io.BytesIO(m.value()[5:]), parsed, None)
                v["_kafka_partition"] = m.partition()
                v["_kafka_offset"] = m.offset()
                rows.append(v)
            if len(rows) >= 100_000 or (rows and done + len(rows) >= count):
                table.append(pa.Table.from_pylist(rows, schema=arrow_schema))
                done += len(rows)
                rows = []
            if time.perf_counter() - t0 > 900:
                raise TimeoutError("naive pipeline too slow")
    finally:
        c.close()
    elapsed = time.perf_counter() - t0
    return {"records": done, "seconds": round(elapsed, 2), "records_per_s": round(done / elapsed)}


def _median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The round with the median records/s, with every round's figure."""
    ranked = sorted(rows, key=lambda r: r["records_per_s"])
    out = dict(ranked[len(ranked) // 2])
    out["rounds_records_per_s"] = [r["records_per_s"] for r in rows]
    return out


def bench_freshness(
    proc: TidelakeProcess, admin: AdminClient, payloads: list[bytes], rate: int, seconds: float
) -> dict[str, Any]:
    topic = "bench-fresh"
    cfg = {
        "table.topic.enable": "true",
        "table.topic.commit.interval.ms": "1000",
        "table.topic.convert.value.type": "by_schema_id",
        "table.topic.transform.value.type": "flatten",
    }
    for f in admin.create_topics([NewTopic(topic, 1, 1, config=cfg)]).values():
        f.result(30)
    catalog = _catalog(proc.data_dir)
    seen: list[tuple[float, int]] = []  # (wall ms first seen, next offset)
    stop = threading.Event()

    def poll() -> None:
        last = -1
        while not stop.is_set():
            try:
                offsets, _ = _committed(catalog, "bench_fresh")
            except Exception:
                offsets = {}
            nxt = offsets.get(0, 0)
            if nxt != last:
                seen.append((time.time() * 1000, nxt))
                last = nxt
            time.sleep(0.05)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    p = Producer({"bootstrap.servers": proc.bootstrap, "linger.ms": 5})
    produced = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        target = int((time.perf_counter() - t0) * rate)
        while produced < target:
            p.produce(topic, payloads[produced % len(payloads)], partition=0)
            produced += 1
        p.poll(0)
        time.sleep(0.005)
    p.flush(30)
    deadline = time.perf_counter() + 30
    while (not seen or seen[-1][1] < produced) and time.perf_counter() < deadline:
        time.sleep(0.1)
    stop.set()
    poller.join(5)
    t = catalog.load_table(("default", "bench_fresh")).scan(
        selected_fields=("_kafka_offset", "_kafka_timestamp")
    )
    data = t.to_arrow().sort_by("_kafka_offset")
    offs = data.column("_kafka_offset").to_pylist()
    tss = [x.timestamp() * 1000 for x in data.column("_kafka_timestamp").to_pylist()]
    fresh: list[float] = []
    j = 0
    for off, ts in zip(offs, tss, strict=True):
        while j < len(seen) and seen[j][1] <= off:
            j += 1
        if j < len(seen):
            fresh.append(seen[j][0] - ts)
    fresh.sort()
    q = statistics.quantiles(fresh, n=100) if len(fresh) > 100 else [0.0] * 99
    table = catalog.load_table(("default", "bench_fresh"))
    files = _files_per_commit(table)
    return {
        "rate_per_s": rate,
        "seconds": seconds,
        "records": produced,
        "rows_in_table": len(offs),
        "freshness_p50_ms": round(q[49]),
        "freshness_p99_ms": round(q[98]),
        "freshness_max_ms": round(max(fresh)) if fresh else None,
        "commits": len(files),
        "files_per_commit_mean": round(statistics.mean(files), 2) if files else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=3_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--fresh-rate", type=int, default=20_000)
    ap.add_argument("--fresh-seconds", type=float, default=15.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-naive", action="store_true")
    ap.add_argument("--convert-processes", type=int, default=0)
    ap.add_argument(
        "--logical-ts", action="store_true", help="ts as timestamp-millis, not a plain long"
    )
    ap.add_argument("--env", action="append", default=[], help="extra KEY=VALUE for the server")
    args = ap.parse_args()
    if args.logical_ts:
        _use_logical_ts()
    scratch = Path(tempfile.mkdtemp(prefix="tabletopic-bench-"))
    env = {
        "TIDELAKE_TABLE_TOPIC_DEFAULT_COMMIT_INTERVAL_MS": "1000",
        "TIDELAKE_LOG_LEVEL": "WARNING",
        "TIDELAKE_TABLE_TOPIC_CONVERT_PROCESSES": str(args.convert_processes),
    }
    env.update(dict(kv.split("=", 1) for kv in args.env))
    proc = TidelakeProcess(scratch / "data", env=env).start()
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "load_avg": os.getloadavg()},
        "server_env": env,
        "records": args.records,
        "partitions": args.partitions,
        "logical_ts": args.logical_ts,
        "rounds": args.rounds,
    }
    try:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        sr = SchemaRegistryClient({"url": proc.registry_url})
        schema_id = sr.register_schema("bench-backlog-value", Schema(json.dumps(SCHEMA), "AVRO"))
        payloads = _payloads(schema_id, 20_000)
        produced, backlog, e2e, naive = [], [], [], []
        for r in range(args.rounds):
            topic = f"bench-backlog-{r}"
            for f in admin.create_topics([NewTopic(topic, args.partitions, 1)]).values():
                f.result(30)
            produce_s = _produce(proc.bootstrap, topic, payloads, args.records, args.partitions)
            produced.append(
                {"seconds": round(produce_s, 2), "records_per_s": round(args.records / produce_s)}
            )
            backlog.append(bench_tidelake(proc, admin, topic, args.records))
            print(f"round {r} backlog:", backlog[-1], flush=True)
            e2e.append(bench_end_to_end(proc, admin, payloads, args.records, args.partitions))
            print(f"round {r} end to end:", e2e[-1], flush=True)
            if not args.skip_naive:
                naive.append(
                    bench_naive(proc, topic, args.records, args.partitions, scratch / f"naive-{r}")
                )
                print(f"round {r} naive:", naive[-1], flush=True)
        results["produce"] = _median_row(produced)
        results["tidelake"] = _median_row(backlog)
        results["end_to_end"] = _median_row(e2e)
        if naive:
            results["naive"] = _median_row(naive)
            results["speedup_vs_naive"] = round(
                results["tidelake"]["records_per_s"] / results["naive"]["records_per_s"], 2
            )
        results["freshness"] = bench_freshness(
            proc, admin, payloads, args.fresh_rate, args.fresh_seconds
        )
    finally:
        proc.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    tl, fr = results["tidelake"], results["freshness"]
    print()
    print(f"{'measure':42} {'value':>14}")
    print("-" * 57)
    print(f"{'produce backlog (records/s)':42} {results['produce']['records_per_s']:>14,}")
    print(f"{'backlog in broker -> committed (records/s)':42} {tl['records_per_s']:>14,}")
    print(
        f"{'end to end produce -> committed (records/s)':42} {results['end_to_end']['records_per_s']:>14,}"
    )
    if "naive" in results:
        print(
            f"{'naive consumer+fastavro+append (records/s)':42} {results['naive']['records_per_s']:>14,}"
        )
        print(f"{'speedup vs naive':42} {results['speedup_vs_naive']:>14}")
    print(
        f"{'backlog commits / files per commit':42} {tl['commits']:>6} / {tl['files_per_commit_mean']}"
    )
    print(
        f"{'freshness p50 / p99 ms (1 s interval)':42} {fr['freshness_p50_ms']:>6} / {fr['freshness_p99_ms']}"
    )
    print(
        f"{'steady commits / files per commit':42} {fr['commits']:>6} / {fr['files_per_commit_mean']}"
    )
    out = (
        Path(__file__).resolve().parent
        / "results"
        / f"table_topic-{time.strftime('%Y%m%dT%H%M%S')}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
