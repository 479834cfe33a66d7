"""Benchmark the built-in Schema Registry over HTTP (not a timed test).

Starts ``schema_registry.app.create_app`` under uvicorn in a separate process on
127.0.0.1 (SQLite store in a temp directory unless ``--store-url`` is given),
then measures, with keep-alive ``httpx`` clients in threads:

- register: ``POST /subjects/{s}/versions`` of distinct 10-field Avro records
- lookup-by-id-cold: ``GET /schemas/ids/{id}``, each id fetched for the first time (store read)
- lookup-by-id: the same over 100 hot ids (answered from the registry's memory): what
  deserializers across many clients do on every new id
- lookup-subject: ``POST /subjects/{s}``, what a serializer does without auto-register
- compatibility: ``POST /compatibility/subjects/{s}/versions/latest`` (BACKWARD, Avro)

Prints a table and writes JSON to ``bench/results/schema_registry_bench-<time>.json``.
Target: lookup-by-id p99 under 5 ms.

    python bench/schema_registry_bench.py --ops 2000 --clients 1 --clients 4
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench._server import start_app_server  # noqa: E402

SERVER = """
import sys, uvicorn
from schema_registry.app import RegistrySettings, create_app
app = create_app(RegistrySettings(store_url=sys.argv[1]))
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", access_log=False)
"""
CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def _start_server(store_url: str) -> tuple[subprocess.Popen[bytes], str]:
    return start_app_server(SERVER, store_url, "/", "registry")


def _record(name: str, fields: int = 10, extra: int = 0) -> str:
    types = ["int", "long", "string", "double", "boolean"]
    out = [{"name": f"f{i}", "type": types[i % len(types)]} for i in range(fields)]
    out += [{"name": f"x{i}", "type": "string", "default": ""} for i in range(extra)]
    return json.dumps({"type": "record", "name": name, "namespace": "bench", "fields": out})


def _run(
    name: str, url: str, ops: int, clients: int, op: Callable[[httpx.Client, int], httpx.Response]
) -> dict[str, Any]:
    latencies: list[float] = []
    lock = threading.Lock()
    per_client = max(1, ops // clients)
    errors = 0

    def worker(index: int) -> None:
        nonlocal errors
        mine: list[float] = []
        bad = 0
        with httpx.Client(base_url=url, timeout=30) as client:
            for i in range(per_client):
                start = time.perf_counter()
                response = op(client, index * per_client + i)
                mine.append(time.perf_counter() - start)
                bad += response.status_code != 200
        with lock:
            latencies.extend(mine)
            errors += bad

    threads = [threading.Thread(target=worker, args=(c,)) for c in range(clients)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    latencies.sort()
    ms = [x * 1000 for x in latencies]
    return {
        "op": name,
        "clients": clients,
        "ops": len(ms),
        "errors": errors,
        "ops_per_s": round(len(ms) / elapsed, 1),
        "p50_ms": round(statistics.median(ms), 3),
        "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 3),
        "max_ms": round(ms[-1], 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=2000, help="operations per measurement")
    parser.add_argument(
        "--clients", type=int, action="append", help="concurrent clients (repeatable)"
    )
    parser.add_argument("--store-url", help="registry store (default: SQLite in a temp dir)")
    parser.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = parser.parse_args()
    clients_list = args.clients or [1, 4]
    tmp = tempfile.TemporaryDirectory(prefix="tidelake-sr-bench-")
    store_url = args.store_url or f"sqlite:///{tmp.name}/schemas.db"
    proc, url = _start_server(store_url)
    results: list[dict[str, Any]] = []
    run_id = f"{os.getpid()}-{int(time.time())}"
    try:
        with httpx.Client(base_url=url) as admin:
            admin.put("/config/bench-compat", json={"compatibility": "BACKWARD"})
            admin.post(
                "/subjects/bench-compat/versions", json={"schema": _record("Compat")}, headers=CT
            )
        ids: list[int] = []
        for clients in clients_list:
            tag = f"{run_id}-{clients}"

            def register(c: httpx.Client, i: int, tag: str = tag) -> httpx.Response:
                r = c.post(
                    f"/subjects/bench-{tag}-{i}/versions",
                    json={"schema": _record(f"R{i}_{tag.replace('-', '_')}")},
                    headers=CT,
                )
                if r.status_code == 200:
                    ids.append(int(r.json()["id"]))
                return r

            results.append(_run("register", url, args.ops, clients, register))
        rng = random.Random(7)
        cold_ids = sorted(ids)
        cold_next = iter(cold_ids)
        cold_lock = threading.Lock()

        def by_id_cold(c: httpx.Client, i: int) -> httpx.Response:
            with cold_lock:
                schema_id = next(cold_next)
            return c.get(f"/schemas/ids/{schema_id}")

        hot = cold_ids[:100]

        def by_id(c: httpx.Client, i: int) -> httpx.Response:
            return c.get(f"/schemas/ids/{hot[rng.randrange(len(hot))]}")

        def lookup(c: httpx.Client, i: int) -> httpx.Response:
            return c.post("/subjects/bench-compat", json={"schema": _record("Compat")}, headers=CT)

        def compat(c: httpx.Client, i: int) -> httpx.Response:
            body = {"schema": _record("Compat", extra=1 + i % 3)}
            return c.post(
                "/compatibility/subjects/bench-compat/versions/latest", json=body, headers=CT
            )

        for clients in clients_list:  # every id fetched once: the store is read each time
            results.append(_run("lookup-by-id-cold", url, args.ops, clients, by_id_cold))
        for name, op in (
            ("lookup-by-id", by_id),
            ("lookup-subject", lookup),
            ("compatibility", compat),
        ):
            for clients in clients_list:
                results.append(_run(name, url, args.ops, clients, op))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        tmp.cleanup()

    header = f"{'operation':<19}{'clients':>8}{'ops':>7}{'ops/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'errors':>8}"
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r['op']:<19}{r['clients']:>8}{r['ops']:>7}{r['ops_per_s']:>10}{r['p50_ms']:>9}"
            f"{r['p99_ms']:>9}{r['max_ms']:>9}{r['errors']:>8}"
        )
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = out_dir / f"schema_registry_bench-{stamp}.json"
    meta = {
        "store": "sqlite" if not args.store_url else args.store_url.split(":")[0],
        "cpus": os.cpu_count(),
    }
    path.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
