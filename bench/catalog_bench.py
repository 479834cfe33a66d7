"""Benchmark the built-in Iceberg REST catalog over HTTP with pyiceberg as the client.

Starts ``catalog.app.create_app`` under uvicorn in a separate process on
127.0.0.1 (embedded SQLite catalog in a temp directory), then measures with
pyiceberg's ``RestCatalog``:

- load-table: ``catalog.load_table`` (GET .../tables/{table}, full metadata)
- commit-table: a property update committed through ``POST .../tables/{table}``
  (requirements checked, new metadata file written, pointer swapped)

Prints a table and writes JSON to ``bench/results/catalog_bench-<time>.json``.

    python bench/catalog_bench.py --ops 500 --clients 1 --clients 4
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench._server import start_app_server  # noqa: E402

SERVER = """
import sys, uvicorn
from catalog.app import create_app
from catalog.config import CatalogSettings
app = create_app(CatalogSettings(data_dir=sys.argv[1]))
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", access_log=False)
"""


def _start_server(data_dir: str) -> tuple[subprocess.Popen[bytes], str]:
    return start_app_server(SERVER, data_dir, "/v1/config", "catalog server")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _run(
    name: str, clients: int, ops: int, make_op: Callable[[int], Callable[[], Any]]
) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    per_client = max(1, ops // clients)

    def worker(index: int) -> None:
        nonlocal errors
        op = make_op(index)
        local: list[float] = []
        failed = 0
        for _ in range(per_client):
            start = time.perf_counter()
            try:
                op()
            except Exception:  # noqa: BLE001 - counted, not fatal
                failed += 1
                continue
            local.append(time.perf_counter() - start)
        with lock:
            latencies.extend(local)
            errors += failed

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    return {
        "operation": name,
        "clients": clients,
        "ops": len(latencies),
        "errors": errors,
        "p50_ms": round(_percentile(latencies, 0.50) * 1000, 2),
        "p99_ms": round(_percentile(latencies, 0.99) * 1000, 2),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 2),
        "throughput_ops_s": round(len(latencies) / elapsed, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ops", type=int, default=400, help="operations per measurement")
    parser.add_argument(
        "--clients", type=int, action="append", help="concurrent clients (repeatable)"
    )
    parser.add_argument("--snapshots", type=int, default=20, help="snapshots in the loaded table")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args(argv)
    client_counts = args.clients or [1, 4]

    with tempfile.TemporaryDirectory() as data_dir:
        proc, url = _start_server(data_dir)
        try:
            setup = RestCatalog("bench", uri=url)
            setup.create_namespace("bench")
            rows = pa.table(
                {"id": pa.array(range(100), pa.int64()), "v": [str(i) for i in range(100)]}
            )
            table = setup.create_table(("bench", "loaded"), rows.schema)
            for _ in range(args.snapshots):
                table.append(rows)

            def load_op(_: int) -> Callable[[], Any]:
                client = RestCatalog("bench", uri=url)
                return lambda: client.load_table(("bench", "loaded"))

            def commit_op(index: int) -> Callable[[], Any]:
                client = RestCatalog("bench", uri=url)
                name = ("bench", f"commit_{index}")
                tbl = client.create_table(name, rows.schema)
                counter = iter(range(10**9))

                def op() -> None:
                    nonlocal tbl
                    txn = tbl.transaction()
                    txn.set_properties({"bench.n": str(next(counter))})
                    tbl = txn.commit_transaction()

                return op

            results = []
            for clients in client_counts:
                results.append(_run("load-table", clients, args.ops, load_op))
            for clients in client_counts:
                for i in range(clients):  # fresh tables per run
                    try:
                        setup.drop_table(("bench", f"commit_{i}"))
                    except Exception:  # noqa: BLE001
                        pass
                results.append(_run("commit-table", clients, args.ops, commit_op))
        finally:
            proc.terminate()
            proc.wait(timeout=10)

    header = f"{'operation':<14}{'clients':>8}{'ops':>7}{'err':>5}{'p50 ms':>9}{'p99 ms':>9}{'mean ms':>9}{'ops/s':>9}"
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r['operation']:<14}{r['clients']:>8}{r['ops']:>7}{r['errors']:>5}{r['p50_ms']:>9}"
            f"{r['p99_ms']:>9}{r['mean_ms']:>9}{r['throughput_ops_s']:>9}"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out_file = args.out / f"catalog_bench-{stamp}.json"
    payload = {
        "benchmark": "catalog_rest",
        "client": "pyiceberg RestCatalog",
        "server": "tidelake catalog app (uvicorn, SQLite catalog, local warehouse)",
        "snapshots_in_loaded_table": args.snapshots,
        "cpu_count": os.cpu_count(),
        "results": results,
    }
    out_file.write_text(json.dumps(payload, indent=2))
    print(f"\nwrote {out_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
