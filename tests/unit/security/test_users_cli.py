"""``tidelake users``: SCRAM credentials written to the metadata store directly."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from api.cli import main
from ingest.metadata import SqliteMetadataStore
from ingest.security import MetadataCredentialStore
from ingest.security.scram import verify_password


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["users", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_create_list_delete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    d = str(tmp_path / "data")
    monkeypatch.setattr("sys.stdin", io.StringIO("pw-from-stdin\n"))
    assert _run(capsys, "create", "alice", "--password-stdin", "--data-dir", d)[0] == 0
    code, out, _ = _run(
        capsys, "create", "bob", "--password", "bob-pw", "--mechanism", "SCRAM-SHA-512",
        "--iterations", "8192", "--data-dir", d,
    )  # fmt: skip
    assert code == 0 and "bob-pw" not in out
    code, out, _ = _run(capsys, "list", "--json", "--data-dir", d)
    assert json.loads(out) == [
        {"user": "alice", "mechanism": "SCRAM-SHA-256", "iterations": 4096},
        {"user": "alice", "mechanism": "SCRAM-SHA-512", "iterations": 4096},
        {"user": "bob", "mechanism": "SCRAM-SHA-512", "iterations": 8192},
    ]
    store = SqliteMetadataStore(tmp_path / "data" / "metadata.db")
    cred = MetadataCredentialStore(store).get("alice", "SCRAM-SHA-256")
    store.close()
    assert cred is not None and verify_password(cred, "pw-from-stdin")
    assert b"pw-from-stdin" not in (tmp_path / "data" / "metadata.db").read_bytes()
    assert _run(capsys, "delete", "alice", "--mechanism", "SCRAM-SHA-256", "--data-dir", d)[0] == 0
    code, _, err = _run(capsys, "delete", "carol", "--data-dir", d)
    assert code == 1 and "no such user carol" in err


@pytest.mark.parametrize("iterations", ["100", "20000"])
def test_iterations_outside_kafkas_bounds_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], iterations: str
) -> None:
    code, _, err = _run(
        capsys, "create", "a", "--password", "x", "--iterations", iterations,
        "--data-dir", str(tmp_path),
    )  # fmt: skip
    assert code == 2 and "iterations" in err


def test_an_empty_password_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "create", "a", "--password", "", "--data-dir", str(tmp_path))
    assert code == 2 and "empty" in err
