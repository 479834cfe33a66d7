"""``tidelake schemas list|get|register`` against a running registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api.commands import schemas
from tests.integration.schema_registry.conftest import RunningRegistry


def run(registry: RunningRegistry, *argv: str) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="tidelake")
    sub = parser.add_subparsers(dest="command")
    schemas.register(sub)
    args = parser.parse_args(["schemas", "--url", registry.url, *argv])
    assert args.func(args) == 0


def test_register_list_and_get(
    registry: RunningRegistry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    avsc = tmp_path / "clicks.avsc"
    avsc.write_text(
        json.dumps(
            {"type": "record", "name": "Click", "fields": [{"name": "url", "type": "string"}]}
        )
    )
    run(registry, "register", "cli-clicks-value", str(avsc))
    registered = json.loads(capsys.readouterr().out)
    assert registered["version"] == 1
    proto = tmp_path / "item.proto"
    proto.write_text('syntax = "proto3";\nmessage Item { string sku = 1; }\n')
    run(registry, "register", "cli-items-value", str(proto))
    capsys.readouterr()
    run(registry, "list", "--prefix", "cli-")
    assert capsys.readouterr().out.split() == ["cli-clicks-value", "cli-items-value"]
    run(registry, "get", "cli-clicks-value")
    assert json.loads(capsys.readouterr().out)["id"] == registered["id"]
    run(registry, "get", "--id", str(registered["id"]), "--schema-only")
    assert json.loads(capsys.readouterr().out)["name"] == "Click"


def test_errors_exit_nonzero_with_the_registry_message(
    registry: RunningRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        run(registry, "get", "cli-missing")
    assert exc.value.code == 1
    assert "40401" in capsys.readouterr().err
