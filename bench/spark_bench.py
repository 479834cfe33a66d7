"""Benchmark Spark compaction of a table written by 1-second streaming commits.

Builds a table in the embedded SQL catalog (SQLite, temp directory) the way a
table topic writes it: every 1 s interval each of ``--partitions`` workers writes
one small Parquet file (``--rows-per-file`` rows) and the coordinator commits
them in one snapshot with ``tidelake.offsets`` (``--commits`` intervals; 250 x 8
gives 2,000 files, 250 snapshots and 250 manifests). Then, in one Spark session
on the same catalog:

1. scan before: ``SELECT key, sum(amount), count(*), max(ts) GROUP BY key`` (reads every row;
   a plain count(*) would be answered from metadata);
2. ``rewrite_data_files`` (bin-pack to ``--target-mb``) and ``rewrite_manifests``;
3. scan after, and the result compared with the one before.

Prints a table and writes JSON to ``bench/results/spark_bench-<time>.json``.

    python bench/spark_bench.py --commits 250 --partitions 8 --rows-per-file 250
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from catalog.config import CatalogSettings  # noqa: E402
from catalog.factory import load_platform_catalog  # noqa: E402
from spark.config import SparkSettings  # noqa: E402
from spark.jobs import rewrite_data_files, rewrite_manifests  # noqa: E402
from spark.session import create_spark_session  # noqa: E402

SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("key", pa.string()),
        pa.field("amount", pa.float64()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("payload", pa.string()),
    ]
)
QUERY = (
    "SELECT key, sum(CAST(amount AS DECIMAL(18, 1))) AS total, count(*) AS n, max(ts) AS last "
    "FROM bench.events GROUP BY key ORDER BY key"
)


def _batch(start: int, rows: int) -> pa.Table:
    offsets = list(range(start, start + rows))
    base = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    return pa.table(
        {
            "offset": offsets,
            "key": [f"user-{o % 97}" for o in offsets],
            "amount": [(o % 1000) / 10 for o in offsets],
            "ts": [datetime.fromtimestamp(base + o / rows, UTC) for o in offsets],
            "payload": [f"event payload {o:012d} " * 3 for o in offsets],
        },
        schema=SCHEMA,
    )


def build_table(
    catalog: Any, commits: int, files_per_commit: int, rows_per_file: int
) -> tuple[Any, float]:
    """Like a table topic: per 1 s interval every partition's worker writes one Parquet
    file and the coordinator commits them together in one snapshot."""
    import pyarrow.parquet as pq

    catalog.create_namespace("bench")
    table = catalog.create_table("bench.events", schema=SCHEMA)
    data_dir = Path(table.location().removeprefix("file://")) / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    offset = 0
    for commit in range(commits):
        paths = []
        for part in range(files_per_commit):
            path = data_dir / f"{commit:06d}-{part:03d}.parquet"
            pq.write_table(_batch(offset, rows_per_file), path, compression="zstd")
            paths.append(f"file://{path}")
            offset += rows_per_file
        table.add_files(paths, snapshot_properties={"tidelake.offsets": json.dumps({"0": offset})})
        if commit % 10 == 9 or commit == commits - 1:
            print(f"\r  {commit + 1}/{commits} commits", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    table.refresh()
    return table, time.perf_counter() - start


def _counts(table: Any) -> tuple[int, int, int]:
    table.refresh()
    snapshot = table.current_snapshot()
    files = sum(1 for _ in table.scan().plan_files())
    manifests = len(snapshot.manifests(table.io)) if snapshot else 0
    size = sum(t.file.file_size_in_bytes for t in table.scan().plan_files())
    return files, manifests, size


def _scan(session: Any, repeats: int) -> tuple[float, list[tuple[Any, ...]]]:
    session.sql(QUERY).collect()  # warm-up: JIT, metadata caches
    times = []
    rows: list[tuple[Any, ...]] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        rows = [tuple(r) for r in session.sql(QUERY).collect()]
        times.append(time.perf_counter() - t0)
    return statistics.median(times), rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=250, help="1-second commits")
    parser.add_argument("--partitions", type=int, default=8, help="files per commit")
    parser.add_argument("--rows-per-file", type=int, default=250)
    parser.add_argument("--target-mb", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3, help="timed scans (median)")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tidelake-spark-bench-") as tmp:
        settings = CatalogSettings(data_dir=Path(tmp))
        catalog = load_platform_catalog(settings)
        print(f"writing {args.commits} commits x {args.partitions} files ...", file=sys.stderr)
        table, build_s = build_table(catalog, args.commits, args.partitions, args.rows_per_file)
        files_before, manifests_before, bytes_before = _counts(table)

        t0 = time.perf_counter()
        session = create_spark_session(
            settings, SparkSettings(master=args.master, log_level="ERROR", driver_memory="2g")
        )
        session_s = time.perf_counter() - t0
        scan_before, rows_before = _scan(session, args.repeats)

        t0 = time.perf_counter()
        compaction = rewrite_data_files(
            session, settings.name, "bench.events", target_file_size_bytes=args.target_mb << 20
        )
        compaction_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        manifests = rewrite_manifests(session, settings.name, "bench.events")
        manifests_s = time.perf_counter() - t0
        files_after, manifests_after, bytes_after = _counts(table)
        scan_after, rows_after = _scan(session, args.repeats)
        session.stop()

    same = rows_before == rows_after
    result = {
        "benchmark": "spark_compaction",
        "time": datetime.now(UTC).isoformat(),
        "params": vars(args),
        "rows": args.commits * args.partitions * args.rows_per_file,
        "build_seconds": round(build_s, 2),
        "session_start_seconds": round(session_s, 2),
        "files_before": files_before,
        "files_after": files_after,
        "manifests_before": manifests_before,
        "manifests_after": manifests_after,
        "bytes_before": bytes_before,
        "bytes_after": bytes_after,
        "compaction_seconds": round(compaction_s, 2),
        "compaction_metrics": compaction.metrics,
        "rewrite_manifests_seconds": round(manifests_s, 2),
        "rewrite_manifests_metrics": manifests.metrics,
        "scan_before_seconds": round(scan_before, 3),
        "scan_after_seconds": round(scan_after, 3),
        "scan_speedup": round(scan_before / scan_after, 2) if scan_after else None,
        "results_identical": same,
    }
    lines = [
        ("rows", f"{result['rows']:,}"),
        ("data files before -> after", f"{files_before} -> {files_after}"),
        ("manifests before -> after", f"{manifests_before} -> {manifests_after}"),
        ("bytes before -> after", f"{bytes_before:,} -> {bytes_after:,}"),
        ("compaction (rewrite_data_files)", f"{compaction_s:.2f} s"),
        ("rewrite_manifests", f"{manifests_s:.2f} s"),
        ("scan before (median)", f"{scan_before:.3f} s"),
        ("scan after (median)", f"{scan_after:.3f} s"),
        ("scan speed-up", f"{result['scan_speedup']}x"),
        ("query results identical", str(same)),
        ("setup: write commits / start Spark", f"{build_s:.1f} s / {session_s:.1f} s"),
    ]
    width = max(len(k) for k, _ in lines)
    print(f"{'metric':<{width}}  value")
    print("-" * (width + 24))
    for key, value in lines:
        print(f"{key:<{width}}  {value}")
    out_dir = REPO / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"spark_bench-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
