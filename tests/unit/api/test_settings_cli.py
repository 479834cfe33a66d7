"""Where the command line loads settings: ``--set`` flags and ``maintenance sync`` targets."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from api.cli import main
from api.commands.serve import add_settings_arguments, settings_from_args


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("TIDELAKE_"):
            monkeypatch.delenv(name)


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_settings_arguments(p)
    return p.parse_args(argv)


def test_set_flags_beat_the_environment_in_any_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIDELAKE_BROKER_NODE_ID", "4")
    monkeypatch.setenv("TIDELAKE_CATALOG_TYPE", "rest")
    s = settings_from_args(
        _args(
            "--data-dir",
            str(tmp_path),
            "--set",
            "broker.node_id=5",
            "--set",
            "catalog.uri=http://catalog:8181/v1",
            "--set",
            "catalog.headers={ x-a = 'b' }",
            "--set",
            "log_level=DEBUG",
        )
    )
    assert s.broker.node_id == 5
    assert s.catalog.uri == "http://catalog:8181/v1"
    assert s.catalog.headers == {"x-a": "b"}
    assert s.process.log_level == "DEBUG"


def test_a_bad_set_flag_exits_2_naming_the_key(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        settings_from_args(_args("--set", "broker.node_id=one"))
    assert exit_.value.code == 2
    assert "broker.node_id" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        settings_from_args(_args("--set", "no-equals-sign"))
    assert "KEY=VALUE" in capsys.readouterr().err


def test_maintenance_sync_refuses_a_rest_target_without_uri_despite_the_platform_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TIDELAKE_CATALOG_TYPE", "rest")
    monkeypatch.setenv("TIDELAKE_CATALOG_URI", "http://127.0.0.1:9/platform")
    cfg = tmp_path / "maintenance.toml"
    cfg.write_text('[[sync.targets]]\ntype = "rest"\nname = "mirror"\n')
    with pytest.raises(SystemExit) as exit_:
        main(["maintenance", "sync", "--data-dir", str(tmp_path), "--maintenance-config", str(cfg)])
    assert exit_.value.code == 2
    assert "sync.targets[0].uri" in capsys.readouterr().err
