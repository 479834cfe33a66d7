"""``tidelake quotas``: client quotas written to the metadata store directly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api.cli import main
from ingest.metadata import SqliteMetadataStore
from ingest.security.quota import MetadataQuotaStore, QuotaEntity


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["quotas", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_set_list_remove(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path / "data")
    assert _run(capsys, "set", "--user", "alice", "--producer-byte-rate", "1048576",
                "--data-dir", d)[0] == 0  # fmt: skip
    code, out, _ = _run(
        capsys, "set", "--default-user", "--client-id", "etl", "--consumer-byte-rate", "5000000",
        "--data-dir", d,
    )  # fmt: skip
    assert code == 0 and "consumer_byte_rate=5000000" in out
    store = SqliteMetadataStore(tmp_path / "data" / "metadata.db")
    try:
        assert MetadataQuotaStore(store).entries() == {
            QuotaEntity.of([("user", "alice")]): {"producer_byte_rate": 1048576.0},
            QuotaEntity.of([("user", None), ("client-id", "etl")]): {
                "consumer_byte_rate": 5000000.0
            },
        }
    finally:
        store.close()
    assert _run(capsys, "remove", "--user", "alice", "--data-dir", d)[0] == 0
    code, out, _ = _run(capsys, "list", "--json", "--data-dir", d)
    assert json.loads(out) == [
        {"entity": {"user": None, "client-id": "etl"}, "quotas": {"consumer_byte_rate": 5000000.0}}
    ]


def test_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path / "data")
    code, _, err = _run(capsys, "set", "--user", "bob", "--data-dir", d)
    assert code == 2 and "--producer-byte-rate" in err
    code, _, err = _run(capsys, "set", "--producer-byte-rate", "10", "--data-dir", d)
    assert code == 2 and "names a user" in err
    code, _, err = _run(
        capsys, "set", "--user", "bob", "--producer-byte-rate", "0", "--data-dir", d
    )
    assert code == 2 and "positive" in err
    code, _, err = _run(capsys, "remove", "--user", "nobody", "--data-dir", d)
    assert code == 1 and "no quota" in err
