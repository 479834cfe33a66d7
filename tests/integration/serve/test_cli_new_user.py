"""The CLI against a real ``tidelake serve``: describing never creates, a taken
port is one line, and ``topics``/``schemas`` find the platform from ``TIDELAKE_*``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.net import free_port
from tests.support.platform import TidelakeProcess

ROOT = Path(__file__).resolve().parents[3]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("TIDELAKE_")}
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=full,
        cwd=ROOT,
    )


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> object:
    proc = TidelakeProcess(
        tmp_path_factory.mktemp("cli") / "data",
        env={"TIDELAKE_BROKER_AUTO_CREATE_TOPICS": "true"},
    ).start()
    yield proc
    proc.stop()


def test_describing_a_missing_topic_exits_1_in_one_line_and_creates_nothing(
    platform: TidelakeProcess,
) -> None:
    env = {"TIDELAKE_KAFKA_LISTEN": platform.bootstrap}
    r = _cli("topics", "describe", "nope", env=env)
    assert r.returncode == 1
    assert r.stderr == "tidelake: topic 'nope' does not exist\n"
    assert "nope" not in _cli("topics", "list", env=env).stdout.split()


def test_topics_found_through_the_environment_and_described_as_before(
    platform: TidelakeProcess,
) -> None:
    env = {"TIDELAKE_KAFKA_LISTEN": platform.bootstrap}
    assert _cli("topics", "create", "described", "-p", "2", env=env).returncode == 0
    r = _cli("topics", "describe", "described", "--json", env=env)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert [p["partition"] for p in info["partitions"]] == [0, 1]
    assert all(p["leader"] is not None and p["replicas"] == p["isr"] for p in info["partitions"])


def test_schemas_found_through_the_environment(platform: TidelakeProcess) -> None:
    r = _cli("schemas", "list", env={"TIDELAKE_REGISTRY_LISTEN": platform.registry_url[7:]})
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("taken_key", ["registry_listen", "http_listen"])
def test_serve_on_a_taken_port_prints_one_line(tmp_path: Path, taken_key: str) -> None:
    listens = {k: free_port() for k in ("kafka_listen", "registry_listen", "http_listen")}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", listens[taken_key]))
        taken.listen()
        flags = [f"--{k.replace('_', '-')}=127.0.0.1:{p}" for k, p in listens.items()]
        r = _cli("serve", "--data-dir", str(tmp_path / "d"), *flags)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1, r.stderr
    assert f"127.0.0.1:{listens[taken_key]} ({taken_key}): address already in use" in r.stderr
