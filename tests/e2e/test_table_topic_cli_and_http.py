"""A user's path: produce to a table topic, then watch it from the CLI and the HTTP API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.platform import TidelakeProcess

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=dict(os.environ),
    )


def test_table_topic_status_preview_and_metrics(tidelake: TidelakeProcess) -> None:
    admin = AdminClient({"bootstrap.servers": tidelake.bootstrap, "log_level": 0})
    topic = NewTopic(
        "clicks",
        2,
        1,
        config={
            "table.topic.enable": "true",
            "table.topic.commit.interval.ms": "1000",
            "table.topic.convert.value.type": "string",
        },
    )
    admin.create_topics([topic])["clicks"].result(15)
    p = Producer({"bootstrap.servers": tidelake.bootstrap, "acks": "all", "log_level": 0})
    for i in range(200):
        p.produce(
            "clicks", key=f"user-{i % 7}".encode(), value=f"click {i}".encode(), partition=i % 2
        )
    assert p.flush(30) == 0

    deadline = time.monotonic() + 60
    row: dict = {}  # type: ignore[type-arg]
    while time.monotonic() < deadline:
        rows = httpx.get(f"{tidelake.http_url}/api/v1/table-topics", timeout=10).json()
        row = next((r for r in rows if r["topic"] == "clicks"), {})
        if row.get("rows_committed") == 200 and row.get("lag") == 0:
            break
        time.sleep(0.5)
    assert row.get("rows_committed") == 200 and row.get("lag") == 0, row
    assert row["dead_letters"] == 0 and row["last_error"] in (None, "")

    status = _cli("tables", "status", "--http-url", tidelake.http_url, "--json")
    assert status.returncode == 0, status.stderr
    assert any(r["topic"] == "clicks" and r["lag"] == 0 for r in json.loads(status.stdout))
    table_view = _cli("tables", "status", "--http-url", tidelake.http_url)
    assert "clicks" in table_view.stdout and "freshness ms" in table_view.stdout

    preview = _cli(
        "tables", "preview", row["table"], "--rest-url", tidelake.http_url, "--limit", "5", "--json"
    )
    assert preview.returncode == 0, preview.stderr
    assert "click " in preview.stdout

    metrics = httpx.get(f"{tidelake.http_url}/metrics", timeout=10).text
    assert 'tidelake_table_topic_lag{topic="clicks"} 0' in metrics
    assert 'tidelake_table_topic_rows_committed_total{topic="clicks"} 200' in metrics
