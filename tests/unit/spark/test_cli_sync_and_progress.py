"""``tidelake maintenance sync`` between local catalogs, and the Spark progress poller."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest

from api.cli import main
from catalog.config import CatalogSettings
from catalog.factory import load_platform_catalog
from spark.progress import SparkProgress


def test_sync_command_mirrors_into_configured_targets_and_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    source = load_platform_catalog(CatalogSettings(data_dir=data))
    source.create_namespace("ns")
    source.create_table("ns.t", schema=pa.schema([pa.field("id", pa.int64())]))
    config = tmp_path / "maintenance.toml"
    config.write_text(
        f'[[sync.targets]]\nname = "copy"\ntype = "sql"\ndata_dir = {json.dumps(str(tmp_path / "copy"))}\n'
    )
    args = ["maintenance", "sync", "--data-dir", str(data), "--maintenance-config", str(config)]
    assert main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["target"] == "copy"
    assert [(c["action"], c["table"]) for c in report["changes"]] == [
        ("create_namespace", "ns"),
        ("register", "ns.t"),
    ]
    assert main([*args, "--every", "0.01", "--max-runs", "2"]) == 0
    assert "0 change(s), 1 unchanged" in capsys.readouterr().out
    target = load_platform_catalog(CatalogSettings(name="copy", data_dir=tmp_path / "copy"))
    assert (
        target.load_table("ns.t").metadata_location == source.load_table("ns.t").metadata_location
    )


def test_sync_command_without_targets_fails_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["maintenance", "sync", "--data-dir", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "no sync targets" in capsys.readouterr().err


def test_bad_policy_key_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "m.toml"
    config.write_text("[policy]\nmin_small_files = 1\n")
    with pytest.raises(SystemExit):
        main(
            [
                "maintenance",
                "status",
                "--data-dir",
                str(tmp_path),
                "--maintenance-config",
                str(config),
            ]
        )
    assert "policy.min_small_files" in capsys.readouterr().err


class _Tracker:
    def getActiveStageIds(self) -> list[int]:  # noqa: N802 - Spark's Java names
        return [3, 4]

    def getStageInfo(self, stage: int) -> Any:  # noqa: N802
        return SimpleNamespace(numCompletedTasks=stage, numTasks=10, name=f"stage{stage} at X.java")


def test_progress_sums_tasks_of_active_stages() -> None:
    session = SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=lambda: _Tracker()))
    progress = SparkProgress(session, lambda _: None).poll()
    assert (progress.stages, progress.tasks_done, progress.tasks_total) == (2, 7, 20)
    assert progress.description == "stage3, stage4"
