"""``tidelake maintenance status|run`` without Spark: a missing table exits 1, and a
run that plans nothing says which thresholds the tables are below."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from api.cli import main
from catalog.config import CatalogSettings
from catalog.factory import load_platform_catalog
from tests.integration.spark.conftest import small_append_table


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("TIDELAKE_"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("maint") / "data"
    small_append_table(load_platform_catalog(CatalogSettings(data_dir=path)), "shop.few", commits=2)
    return path


def test_status_of_a_missing_table_exits_1(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["maintenance", "status", "--data-dir", str(data_dir)]
    assert main([*argv, "--table", "shop.few"]) == 0
    capsys.readouterr()
    assert main([*argv, "--table", "default.nope"]) == 1
    assert "default.nope" in capsys.readouterr().err
    assert main([*argv, "--table", "default.nope", "--json"]) == 1
    [line] = capsys.readouterr().out.splitlines()
    assert json.loads(line)["error"]


def test_status_and_a_run_that_plans_nothing_explain_the_threshold(
    data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["maintenance", "status", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert "remove_orphan_files" in out  # planned, but no compaction: say why
    assert "shop.few: no compaction: compaction at 10 small files" in out
    monkeypatch.setenv("TIDELAKE_MAINTENANCE_REMOVE_ORPHANS", "false")
    assert main(["maintenance", "status", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert "shop.few: nothing planned: compaction at 10 small files" in out
    assert main(["maintenance", "run", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert (
        "shop.few: nothing planned: compaction at 10 small files (< 96 MiB, min_small_files), "
        "has 2" in out
    )
    assert "--force runs the jobs anyway" in out


@pytest.mark.parametrize("command", ["schemas", "tables", "maintenance", "topics", "storage"])
def test_command_families_have_a_description(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    usage, _, rest = text.partition("\n\n")
    description = rest.split("\n\n")[0]
    assert not description.startswith(("positional", "options")), text
    assert len(description.split()) >= 8


def test_every_option_of_these_commands_has_help_and_states_its_default() -> None:
    import argparse

    from api.cli import build_parser

    families = {"serve", "topics", "tables", "schemas", "maintenance", "sql", "storage"}
    missing: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    if path or name in families:
                        walk(sub, [*path, name])
            elif isinstance(action, argparse._HelpAction):
                continue
            elif not action.help:
                missing.append(f"{' '.join(path)} {action.option_strings or action.dest}: no help")
            elif action.option_strings and action.default not in (
                None,
                False,
                [],
                argparse.SUPPRESS,
            ):
                if "default" not in action.help:
                    missing.append(f"{' '.join(path)} {action.option_strings}: no default")

    walk(build_parser(), [])
    assert missing == []
