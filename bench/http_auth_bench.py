"""HTTP security benchmark: schema registry requests/s and p99 with auth off,
basic auth (SCRAM-checked, then cached), a static bearer token, and basic auth
over HTTPS, in the same run.

Each variant is the registry app under uvicorn in its own process (memory
store, one user with roles); one keep-alive client per thread asks
``GET /schemas/ids/1`` (what every deserializer asks; the fast path) and
``GET /subjects/bench-value/versions/latest`` (a routed read). Also the cost
of one uncached basic check (PBKDF2 at 4096 iterations). Prints a table and
writes bench/results/http_auth.json.

    python -m bench.http_auth_bench [--requests 3000] [--clients 4]
"""

from __future__ import annotations

import argparse
import base64
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

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integration.security.certs import make_pki  # noqa: E402
from tests.support.net import free_port  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parents[1]
USER, PASSWORD, TOKEN = "bench", "bench-password-1", "bench-static-token"

SERVER = """
import json, sys, uvicorn
from ingest.security.credentials import MemoryCredentialStore
from ingest.security.scram import make_credential
from schema_registry.app import RegistrySettings, create_app
conf = json.loads(sys.argv[1])
users = MemoryCredentialStore()
users.put("bench", make_credential("bench-password-1", "SCRAM-SHA-512"))
tls = conf.pop("tls", {})
app = create_app(RegistrySettings(store_url="memory://", **conf), credentials=users)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning",
            access_log=False, **tls)
"""
SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})


def _start(conf: dict[str, Any]) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", SERVER, json.dumps(conf), str(port)], env=env)
    deadline = time.monotonic() + 30
    import socket

    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, port
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("registry did not start") from None
            time.sleep(0.1)


def _client(base: str, headers: dict[str, str], verify: Any) -> httpx.Client:
    return httpx.Client(base_url=base, headers=headers, verify=verify, timeout=30)


def _load(
    base: str, headers: dict[str, str], verify: Any, path: str, total: int, clients: int
) -> dict[str, float]:
    latencies: list[float] = []
    lock = threading.Lock()
    per = total // clients

    def work() -> None:
        mine: list[float] = []
        with _client(base, headers, verify) as c:
            for _ in range(per):
                t0 = time.perf_counter()
                r = c.get(path)
                mine.append(time.perf_counter() - t0)
                assert r.status_code == 200, r.text
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=work) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "req_per_s": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--clients", type=int, default=4)
    args = ap.parse_args()
    basic = {"Authorization": "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()}
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    roles = {USER: ["write:bench-*"]}
    with tempfile.TemporaryDirectory() as tmp:
        pki = make_pki(Path(tmp) / "pki")
        tls = {"ssl_certfile": str(pki.server_cert), "ssl_keyfile": str(pki.server_key)}
        variants: list[tuple[str, dict[str, Any], dict[str, str], str]] = [
            ("auth none", {}, {}, "http"),
            ("basic (cached)", {"auth": "basic", "roles": roles}, basic, "http"),
            (
                "bearer (static)",
                {"auth": "bearer", "bearer_tokens": {TOKEN: USER}, "roles": roles},
                bearer,
                "http",
            ),
            ("basic + HTTPS", {"auth": "basic", "roles": roles, "tls": tls}, basic, "https"),
        ]
        rows: list[dict[str, Any]] = []
        for name, conf, headers, scheme in variants:
            proc, port = _start(conf)
            try:
                base = f"{scheme}://localhost:{port}"
                verify: Any = str(pki.ca) if scheme == "https" else True
                with _client(base, headers, verify) as c:
                    t0 = time.perf_counter()
                    r = c.post(
                        "/subjects/bench-value/versions",
                        json={"schema": SCHEMA},
                        headers={"Content-Type": "application/json"},
                    )
                    first_ms = (time.perf_counter() - t0) * 1000
                    assert r.status_code == 200, r.text
                for path in ("/schemas/ids/1", "/subjects/bench-value/versions/latest"):
                    _load(base, headers, verify, path, args.clients * 50, args.clients)  # warm
                    got = _load(base, headers, verify, path, args.requests, args.clients)
                    rows.append(
                        {"variant": name, "path": path, "first_request_ms": first_ms, **got}
                    )
            finally:
                proc.terminate()
                proc.wait(10)
    base_rates = {r["path"]: r["req_per_s"] for r in rows if r["variant"] == "auth none"}
    print(
        f"{'variant':<17} {'path':<40} {'req/s':>8} {'x none':>7} {'p50 ms':>7} {'p99 ms':>7} {'1st ms':>7}"
    )
    for row in rows:
        row["ratio_to_none"] = row["req_per_s"] / base_rates[row["path"]]
        print(
            f"{row['variant']:<17} {row['path']:<40} {row['req_per_s']:>8.0f} {row['ratio_to_none']:>7.2f} "
            f"{row['p50_ms']:>7.2f} {row['p99_ms']:>7.2f} {row['first_request_ms']:>7.1f}"
        )
    RESULTS.mkdir(exist_ok=True)
    out = {"requests": args.requests, "clients": args.clients, "rows": rows}
    (RESULTS / "http_auth.json").write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
