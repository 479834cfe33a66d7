"""Delta Lake next to Iceberg: the same topic's backlog turned into a table, records/s.

    python -m bench.delta_bench [--records 2000000] [--partitions 2] [--rounds 3]

It runs ``tidelake serve`` as a real process (free loopback ports, a scratch
data directory), produces one 10-field Avro backlog (the table topic bench's
schema) with confluent-kafka, then per round converts that same backlog twice:
``table.topic.format=iceberg`` and ``=delta`` (the order alternates per round),
each into a fresh table (a new ``table.topic.namespace``), timing from the
config change until the table records every offset (the Iceberg snapshot's
``tidelake.offsets``, the Delta commit's ``txn`` versions). Reports the median
of the rounds and the ratio (target: Delta >= 0.8x Iceberg).

Prints a table and writes JSON to ``bench/results/delta-<time>.json``. Not a
timed test; the machine is shared, so figures are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from deltalake import DeltaTable  # noqa: E402
from deltalake.exceptions import TableNotFoundError  # noqa: E402

from bench.table_topic_bench import SCHEMA, _catalog, _committed, _payloads, _produce  # noqa: E402
from tests.support.platform import TidelakeProcess  # noqa: E402

TOPIC = "bench-delta"


def _delta_committed(path: Path) -> dict[int, int]:
    """Each partition's txn version (next offset), from the Delta log entries."""
    out: dict[int, int] = {}
    log = path / "_delta_log"
    if not log.exists():
        return out
    try:
        DeltaTable(str(path))  # the table is readable (not half-created)
    except TableNotFoundError:
        return out
    for f in sorted(log.glob("*.json")):
        for line in f.read_text().splitlines():
            if '"txn"' in line:
                txn = json.loads(line)["txn"]
                out[int(txn["appId"].rsplit(":", 1)[1])] = int(txn["version"])
    return out


def _convert(
    proc: TidelakeProcess, admin: AdminClient, fmt: str, namespace: str, count: int
) -> dict[str, Any]:
    cfg = {
        "table.topic.enable": "true",
        "table.topic.commit.interval.ms": "1000",
        "table.topic.convert.value.type": "by_schema_id",
        "table.topic.transform.value.type": "flatten",
        "table.topic.format": fmt,
        "table.topic.namespace": namespace,
    }
    catalog = _catalog(proc.data_dir)
    table = TOPIC.replace("-", "_")
    delta_path = proc.data_dir.resolve() / "warehouse" / "delta" / namespace / table
    t0 = time.perf_counter()
    for f in admin.alter_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, TOPIC, set_config=cfg)]
    ).values():
        f.result(30)
    while True:
        if fmt == "iceberg":
            try:
                offsets, _ = _committed_in(catalog, namespace, table)
            except Exception:  # noqa: BLE001 - not created yet
                offsets = {}
        else:
            offsets = _delta_committed(delta_path)
        if sum(offsets.values()) >= count:
            break
        if time.perf_counter() - t0 > 900:
            raise TimeoutError(f"{fmt}: {sum(offsets.values())} of {count}\n{proc.log_tail()}")
        time.sleep(0.05)
    elapsed = time.perf_counter() - t0
    if fmt == "delta":
        rows = DeltaTable(str(delta_path)).to_pyarrow_dataset().count_rows()
    else:
        rows = catalog.load_table((namespace, table)).scan().to_arrow().num_rows
    assert rows == count, f"{fmt}: {rows} rows for {count} records"
    return {"seconds": round(elapsed, 2), "records_per_s": round(count / elapsed), "rows": rows}


def _committed_in(catalog: Any, namespace: str, table: str) -> tuple[dict[int, int], Any]:
    if namespace == "default":
        return _committed(catalog, table)
    t = catalog.load_table((namespace, table))
    snap = t.current_snapshot()
    if snap is None or "tidelake.offsets" not in snap.summary.additional_properties:
        return {}, t
    raw = json.loads(snap.summary.additional_properties["tidelake.offsets"])
    return {int(k): v for k, v in raw.items()}, t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="delta-bench-"))
    env = {
        "TIDELAKE_TABLE_TOPIC_DEFAULT_COMMIT_INTERVAL_MS": "1000",
        "TIDELAKE_LOG_LEVEL": "WARNING",
    }
    proc = TidelakeProcess(scratch / "data", env=env).start()
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "load_avg_start": os.getloadavg()},
        "records": args.records,
        "partitions": args.partitions,
        "rounds": [],
    }
    try:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        sr = SchemaRegistryClient({"url": proc.registry_url})
        schema_id = sr.register_schema(f"{TOPIC}-value", Schema(json.dumps(SCHEMA), "AVRO"))
        for f in admin.create_topics([NewTopic(TOPIC, args.partitions, 1)]).values():
            f.result(30)
        _produce(proc.bootstrap, TOPIC, _payloads(schema_id, 20_000), args.records, args.partitions)
        for r in range(args.rounds):
            order = ("iceberg", "delta") if r % 2 == 0 else ("delta", "iceberg")
            row: dict[str, Any] = {}
            for fmt in order:
                row[fmt] = _convert(proc, admin, fmt, f"r{r}{fmt}", args.records)
                print(f"round {r + 1} {fmt}: {row[fmt]}", flush=True)
            results["rounds"].append(row)
    finally:
        proc.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    results["machine"]["load_avg_end"] = os.getloadavg()
    med = {
        fmt: statistics.median(r[fmt]["records_per_s"] for r in results["rounds"])
        for fmt in ("iceberg", "delta")
    }
    results["median_records_per_s"] = med
    results["delta_over_iceberg"] = round(med["delta"] / med["iceberg"], 3)
    print()
    print(f"{'round':>5} {'iceberg rec/s':>15} {'delta rec/s':>15} {'delta/iceberg':>14}")
    print("-" * 52)
    for i, r in enumerate(results["rounds"], 1):
        ice, dl = r["iceberg"]["records_per_s"], r["delta"]["records_per_s"]
        print(f"{i:>5} {ice:>15,} {dl:>15,} {dl / ice:>14.2f}")
    print("-" * 52)
    print(
        f"{'median':>5} {med['iceberg']:>15,.0f} {med['delta']:>15,.0f} "
        f"{results['delta_over_iceberg']:>14.2f}   (target >= 0.80)"
    )
    out = (
        Path(__file__).resolve().parent / "results" / f"delta-{time.strftime('%Y%m%dT%H%M%S')}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
