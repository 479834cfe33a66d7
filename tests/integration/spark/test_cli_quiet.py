"""``tidelake sql`` keeps Spark's own start-up noise (NativeCodeLoader, log-level
banners) out of the command's output unless ``--verbose``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark


def test_sql_prints_the_result_and_nothing_of_spark(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "api.cli", "sql", "SELECT 1 AS one", "--master", "local[1]"],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "TIDELAKE_DATA_DIR": str(tmp_path / "data")},
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert "NativeCodeLoader" not in r.stdout and "log level" not in r.stdout
    assert r.stdout.rstrip().endswith("1 row")
