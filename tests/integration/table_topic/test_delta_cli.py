"""``tidelake tables`` and ``tidelake maintenance`` on a table topic's Delta table:
listed with its format, described with its offsets, compacted, checkpointed and
vacuumed under the maintenance policy without Spark, rows unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from deltalake import DeltaTable

from tests.integration.table_topic.conftest import TableTopics
from tests.integration.table_topic.test_cli_tables import ROOT
from tests.integration.table_topic.test_delta import delta_path, wait_delta
from tests.support.platform import TidelakeProcess


def _cli(
    proc: TidelakeProcess, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("TIDELAKE_")}
    full.update(TIDELAKE_DATA_DIR=str(proc.data_dir), **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=full,
        cwd=ROOT,
    )


def test_tables_and_maintenance_cover_delta_tables(tt: TableTopics) -> None:
    topic = "delta-maint"
    tt.create_topic(
        topic, **{"table.topic.format": "both", "table.topic.convert.value.type": "string"}
    )
    for wave in range(4):  # one commit (one small file) per wave
        tt.produce(topic, [(None, f"v{wave}-{i}".encode()) for i in range(25)])
        wait_delta(tt, topic, 25 * (wave + 1))
    before = sorted(DeltaTable(str(delta_path(tt, topic))).to_pyarrow_table()["value"].to_pylist())
    assert len(before) == 100

    listed = _cli(tt.proc, "tables", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    formats = {(r["identifier"], r["format"]) for r in json.loads(listed.stdout)}
    assert {("default.delta_maint", "iceberg"), ("default.delta_maint", "delta")} <= formats

    desc = _cli(tt.proc, "tables", "describe", "default.delta_maint", "--format", "delta", "--json")
    assert desc.returncode == 0, desc.stderr
    info = json.loads(desc.stdout)
    assert info["format"] == "delta" and info["files"] >= 4 and info["rows"] == 100
    assert info["offsets"] == {"0": 100}

    policy = {
        "TIDELAKE_MAINTENANCE_MIN_SMALL_FILES": "2",
        "TIDELAKE_MAINTENANCE_MAX_SNAPSHOTS": "1",
    }
    status = _cli(
        tt.proc, "maintenance", "status", "--table", "default.delta_maint", "--json", env=policy
    )
    lines = [json.loads(x) for x in status.stdout.splitlines() if x.strip()]
    delta_status = next(x for x in lines if x.get("format") == "delta")
    assert {p["job"] for p in delta_status["planned"]} >= {"optimize", "checkpoint", "vacuum"}

    run = _cli(
        tt.proc,
        "maintenance",
        "run",
        "--table",
        "default.delta_maint",
        "--job",
        "optimize",
        "--job",
        "checkpoint",
        "--json",
        env=policy,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    jobs = {json.loads(x)["job"]: json.loads(x) for x in run.stdout.splitlines() if '"delta"' in x}
    assert jobs["optimize"]["metrics"]["files_removed"] >= 4
    assert "checkpoint" in jobs
    table = DeltaTable(str(delta_path(tt, topic)))
    assert len(table.file_uris()) == 1
    assert sorted(table.to_pyarrow_table()["value"].to_pylist()) == before
    assert (delta_path(tt, topic) / "_delta_log" / "_last_checkpoint").exists()
    # the broker goes on committing after the compaction, exactly once
    tt.produce(topic, [(None, b"after")])
    rows = wait_delta(tt, topic, 101)
    assert rows.num_rows == 101
