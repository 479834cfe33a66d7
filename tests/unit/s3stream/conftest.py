"""``wal_writer``: runs a file WAL test on both group-commit writer threads (a
module takes it for all its tests with ``pytestmark =
pytest.mark.usefixtures("wal_writer")``)."""

from __future__ import annotations

import pytest

from ingest.s3stream.wal import file as file_wal


@pytest.fixture(params=["c-writer", "c-writer-depth1", "python-writer"])
def wal_writer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs on both group-commit writer threads, the C one with its
    default sync depth (2: group commits overlap) and with one at a time (the
    C one is built with the package: its absence is a failure, not a skip)."""
    native = request.param != "python-writer"
    assert file_wal.NATIVE or not native, "ingest.s3stream.wal._groupcommit is not built"
    monkeypatch.setattr(file_wal, "NATIVE", native)
    if request.param == "c-writer-depth1":
        monkeypatch.setattr(file_wal, "SYNC_DEPTH", 1)
    return str(request.param)
