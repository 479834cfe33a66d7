"""Upsert commits: merge-on-read (Tidelake's position deletes) vs copy-on-write.

    python -m bench.upsert_bench [--rows 1000000] [--commits 20] [--batch 5000]

Two tables start from the same ``--rows`` rows (ids 0..rows-1, written in 8
files). Then ``--commits`` keyed commits of ``--batch`` upserts each (random ids,
a tenth of them new) go to each table:

- ``merge-on-read``: Tidelake's ``TableWriter`` (position delete files plus the
  new rows in one snapshot);
- ``copy-on-write``: what the table topic did before, pyiceberg's
  ``delete(In(ids))`` plus ``append`` in one transaction, which rewrites every
  file holding a replaced id.

Per commit: wall time p50/p99 and bytes written; after all commits: files,
delete files, a full pyiceberg scan's time, and whether both tables hold the
same rows. Prints a table and writes JSON to ``bench/results/upsert_bench.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pyiceberg.catalog.sql import SqlCatalog  # noqa: E402
from pyiceberg.expressions import In  # noqa: E402
from pyiceberg.table import Table  # noqa: E402

from ingest.log.topic_config import TopicConfigRegistry  # noqa: E402
from table_topic.commit import TableWriter  # noqa: E402
from table_topic.config import TableTopicConfig, register_table_topic_configs  # noqa: E402
from table_topic.convert.chunk import METADATA_FIELDS  # noqa: E402


def _cfg(topic: str) -> TableTopicConfig:
    reg = TopicConfigRegistry.default()
    register_table_topic_configs(reg)
    return TableTopicConfig.from_topic_config(
        topic,
        reg.resolved(
            reg.validate(
                {
                    "table.topic.convert.value.type": "by_schema_id",
                    "table.topic.transform.value.type": "flatten",
                    "table.topic.id.columns": "id",
                    "table.topic.upsert.enable": "true",
                }
            )
        ),
    )


def _rows(first_offset: int, ids: list[int], tag: str) -> pa.Table:
    n = len(ids)
    offsets = range(first_offset, first_offset + n)
    meta = [
        pa.array([0] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array([1_700_000_000_000_000 + o for o in offsets], pa.timestamp("us", tz="UTC")),
        pa.array([None] * n, pa.binary()),
        pa.array([[]] * n, METADATA_FIELDS[4].type),
    ]
    cols = [
        pa.array(ids, pa.int64()),
        pa.array([f"{tag}-{i}" for i in ids]),
        pa.array([i * 0.5 for i in ids], pa.float64()),
        pa.array([f"account-{i % 10_000:05d}" for i in ids]),
    ]
    return pa.Table.from_arrays(
        meta + cols, names=[f.name for f in METADATA_FIELDS] + ["id", "v", "amount", "account"]
    )


def _bytes_added(table: Table, since: int | None) -> int:
    """Bytes of files added by the snapshots after ``since`` (a commit may make two)."""
    total = 0
    snap = table.current_snapshot()
    while snap is not None and snap.snapshot_id != since:
        if snap.summary is not None:
            total += int(snap.summary.additional_properties.get("added-files-size", "0"))
        snap = table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id else None
    return total


def _head(table: Table) -> int | None:
    snap = table.current_snapshot()
    return snap.snapshot_id if snap is not None else None


def _pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(p * len(s)))] * 1000, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--commits", type=int, default=20)
    ap.add_argument("--batch", type=int, default=5_000)
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="upsert-bench-"))
    catalog = SqlCatalog(
        "bench", uri=f"sqlite:///{scratch}/c.db", warehouse=(scratch / "wh").as_uri()
    )
    results: dict[str, Any] = {"rows": args.rows, "commits": args.commits, "batch": args.batch}
    try:
        mor = TableWriter(catalog, _cfg("mor"), 512 << 20)
        cow = TableWriter(catalog, _cfg("cow"), 512 << 20)
        per_file = args.rows // 8
        offset = 0
        for f in range(8):  # the initial rows, 8 files, written the same way for both
            ids = list(range(f * per_file, (f + 1) * per_file))
            mor.commit([_rows(offset, ids, "init")], {0: offset + len(ids)})
            cow.commit([_rows(offset, ids, "init")], {0: offset + len(ids)})
            offset += len(ids)
        cow_table = catalog.load_table(("default", "cow"))
        rnd = random.Random(1)
        timing: dict[str, list[float]] = {"merge-on-read": [], "copy-on-write": []}
        written: dict[str, list[int]] = {"merge-on-read": [], "copy-on-write": []}
        for c in range(args.commits):
            ids = list(
                {
                    rnd.randrange(args.rows) if rnd.random() < 0.9 else args.rows + rnd.randrange(args.rows)
                    for _ in range(args.batch)
                }
            )
            batch = _rows(offset, ids, f"c{c}")
            offsets = {0: offset + len(ids)}
            before = _head(catalog.load_table(("default", "mor")))
            t0 = time.perf_counter()
            mor.commit([batch], offsets)
            timing["merge-on-read"].append(time.perf_counter() - t0)
            written["merge-on-read"].append(
                _bytes_added(catalog.load_table(("default", "mor")), before)
            )
            before = _head(cow_table)
            t0 = time.perf_counter()
            txn = cow_table.transaction()
            txn.delete(In("id", set(ids)))  # type: ignore[arg-type]
            txn.append(batch)
            cow_table = txn.commit_transaction()
            timing["copy-on-write"].append(time.perf_counter() - t0)
            written["copy-on-write"].append(_bytes_added(cow_table, before))
            offset += len(ids)
        rows_out: dict[str, dict[int, str]] = {}
        for name, ident in (("merge-on-read", "mor"), ("copy-on-write", "cow")):
            table = catalog.load_table(("default", ident))
            tasks = list(table.scan().plan_files())
            t0 = time.perf_counter()
            got = table.scan(selected_fields=("id", "v")).to_arrow()
            scan_s = time.perf_counter() - t0
            rows_out[name] = dict(
                zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True)
            )
            results[name] = {
                "commit p50 ms": _pct(timing[name], 0.5),
                "commit p99 ms": _pct(timing[name], 0.99),
                "MB written/commit": round(statistics.mean(written[name]) / 1e6, 2),
                "data files": len(tasks),
                "delete files": len({d.file_path for t in tasks for d in t.delete_files}),
                "scan s": round(scan_s, 2),
                "rows": got.num_rows,
            }
        results["same rows"] = rows_out["merge-on-read"] == rows_out["copy-on-write"]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    keys = list(results["merge-on-read"])
    print(f"{'layout':<16}" + "".join(f"{k:>20}" for k in keys))
    for name in ("merge-on-read", "copy-on-write"):
        print(f"{name:<16}" + "".join(f"{results[name][k]!s:>20}" for k in keys))
    print(f"both tables hold the same rows: {results['same rows']}")
    out = Path(__file__).with_name("results") / "upsert_bench.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
