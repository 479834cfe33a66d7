"""``tidelake sql``, ``tidelake maintenance`` and spark-submit, as users run them.

Each command starts its own Spark driver; they read the same settings as
``tidelake serve`` (``--data-dir``, ``--config``, ``TIDELAKE_*``).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from catalog.config import CatalogSettings
from catalog.factory import load_platform_catalog
from tests.integration.spark.conftest import checksum, data_file_count, small_append_table

pytestmark = pytest.mark.spark


def _tidelake(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **(env or {})},
        check=False,
    )


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "data"
    catalog = load_platform_catalog(CatalogSettings(data_dir=path))
    small_append_table(catalog, "shop.orders", commits=12)
    return path


def test_status_run_and_sql_use_the_platform_settings(data_dir: Path, tmp_path: Path) -> None:
    status = _tidelake("maintenance", "status", "--json", env={"TIDELAKE_DATA_DIR": str(data_dir)})
    assert status.returncode == 0, status.stderr
    [line] = status.stdout.splitlines()
    before = json.loads(line)
    assert before["table"] == "shop.orders" and before["stats"]["data_files"] == 12
    assert "rewrite_data_files" in [p["job"] for p in before["planned"]]

    run = _tidelake(
        "maintenance",
        "run",
        "--data-dir",
        str(data_dir),
        "--master",
        "local[1]",
        "--job",
        "rewrite_data_files",
        "--json",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = [json.loads(x) for x in run.stdout.splitlines()]
    assert [(r["table"], r["job"]) for r in results] == [("shop.orders", "rewrite_data_files")]
    assert results[0]["metrics"]["rewritten_data_files_count"] == 12
    catalog = load_platform_catalog(CatalogSettings(data_dir=data_dir))
    table = catalog.load_table("shop.orders")
    assert data_file_count(table) == 1

    config = tmp_path / "tidelake.toml"
    config.write_text(f"data_dir = {json.dumps(str(data_dir))}\n")
    sql = _tidelake(
        "sql",
        "--config",
        str(config),
        "--master",
        "local[1]",
        "--format",
        "json",
        "SELECT count(*) AS n, sum(id) AS s FROM shop.orders",
    )
    assert sql.returncode == 0, sql.stderr[-3000:]
    assert json.loads(sql.stdout) == {"n": 120, "s": sum(range(120))}
    assert checksum(table.scan().to_arrow())[0] == 120


def test_sql_reports_spark_errors_and_exits_nonzero(data_dir: Path) -> None:
    bad = _tidelake(
        "sql", "--data-dir", str(data_dir), "--master", "local[1]", "SELECT * FROM shop.nope"
    )
    assert bad.returncode == 1
    assert "TABLE_OR_VIEW_NOT_FOUND" in bad.stderr


def test_submit_command_runs_maintenance_under_spark_submit(data_dir: Path) -> None:
    catalog = load_platform_catalog(CatalogSettings(data_dir=data_dir))
    small_append_table(catalog, "shop.returns", commits=6)
    printed = _tidelake(
        "maintenance", "submit-command", "--data-dir", str(data_dir), "--master", "local[1]"
    )
    assert printed.returncode == 0, printed.stderr
    command = shlex.split(printed.stdout)
    assert command[0] == "spark-submit"
    import pyspark

    command[0] = str(Path(pyspark.__file__).parent / "bin" / "spark-submit")
    command += ["--table", "shop.returns", "--job", "rewrite_data_files", "--force"]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=240, env=env, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [result] = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    assert (
        result["job"] == "rewrite_data_files" and result["metrics"]["added_data_files_count"] == 1
    )
    assert data_file_count(catalog.load_table("shop.returns")) == 1
