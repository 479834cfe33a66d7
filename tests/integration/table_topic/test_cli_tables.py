"""``tidelake tables status`` and ``tables preview`` on a running platform: dead
letters still counted after a restart, files per commit rounded, preview rows by
partition and offset with text keys shown as text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.integration.table_topic.conftest import TT_ENV, TableTopics
from tests.support.platform import TidelakeProcess

ROOT = Path(__file__).resolve().parents[3]


def _cli(proc: TidelakeProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDELAKE_")}
    env.update(
        TIDELAKE_DATA_DIR=str(proc.data_dir),
        TIDELAKE_KAFKA_LISTEN=proc.bootstrap,
        TIDELAKE_HTTP_LISTEN=proc.http_url.removeprefix("http://"),
    )
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )


def _status(proc: TidelakeProcess, topic: str, ready: Any, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    row: dict[str, Any] = {}
    while time.monotonic() < deadline:
        rows = httpx.get(f"{proc.http_url}/api/v1/table-topics", timeout=10).json()
        row = next((r for r in rows if r["topic"] == topic), {})
        if row and ready(row):
            return row
        time.sleep(0.3)
    raise AssertionError(f"{topic}: {row}\n{proc.log_tail()}")


def test_status_keeps_dead_letters_across_a_restart_and_preview_orders_rows(
    tmp_path: Path,
) -> None:
    proc = TidelakeProcess(tmp_path / "data", env=dict(TT_ENV)).start()
    try:
        tt = TableTopics(proc)
        tt.create_topic("bad", **{"table.topic.convert.value.type": "by_schema_id"})
        tt.create_topic("keyed", partitions=2)
        tt.produce("bad", [(b"k", b"no schema id here")] * 3)
        for p in (1, 0):
            tt.produce("keyed", [(f"k{p}-{i}".encode(), b"v") for i in range(4)], partition=p)
        tt.produce("keyed", [(b"\xff\xfe", b"v")], partition=1)  # not text
        _status(proc, "bad", lambda r: r["dead_letters"] == 3)
        _status(proc, "keyed", lambda r: r["rows_committed"] == 9)

        preview = _cli(proc, "tables", "preview", "default.keyed")
        assert preview.returncode == 0, preview.stderr
        lines = preview.stdout.splitlines()
        keys = [
            next(c for c in line.split() if c.startswith("k0-") or c.startswith("k1-"))
            for line in lines
            if " k0-" in line or " k1-" in line
        ]
        assert keys == [f"k{p}-{i}" for p in (0, 1) for i in range(4)]
        assert any("//4=" in line for line in lines)  # b"\xff\xfe" stays base64
        assert "by partition and offset" in lines[-1]
    finally:
        assert proc.stop() == 0

    again = TidelakeProcess(
        proc.data_dir,
        env=dict(TT_ENV),
        kafka_port=proc.kafka_port,
        registry_port=proc.registry_port,
        http_port=proc.http_port,
    ).start()
    try:
        _status(again, "bad", lambda r: r["state"] in ("running", "starting"))
        r = _cli(again, "tables", "status", "--json")
        assert r.returncode == 0, r.stderr
        rows = {row["topic"]: row for row in json.loads(r.stdout)}
        assert rows["bad"]["dead_letters"] == 3
        fpc = rows["keyed"]["files_per_commit"]
        assert fpc is None or fpc == round(fpc, 1)
    finally:
        assert again.stop() == 0
