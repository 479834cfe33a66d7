"""kafkajs for the tests: the pinned version (tests/integration/broker/kafkajs/
package.json) installed into ``.cache/kafkajs`` (git-ignored) by
``scripts/dev.sh install`` or else by the ``kafkajs`` fixture. Without
Node.js, or when kafkajs cannot be installed or loaded, the tests that use it
fail and say why; they never skip."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["kafkajs", "SCRIPTS"]

SCRIPTS = Path(__file__).resolve().parents[1] / "integration" / "broker" / "kafkajs"
_JS = SCRIPTS
_CACHE = Path(__file__).resolve().parents[2] / ".cache" / "kafkajs"


def _install_kafkajs() -> None:
    """Install the pinned kafkajs into ``_CACHE`` unless it is there already."""
    wanted = (_JS / "package.json").read_text()
    manifest = _CACHE / "package.json"
    if (
        manifest.exists()
        and manifest.read_text() == wanted
        and (_CACHE / "node_modules" / "kafkajs" / "package.json").exists()
    ):
        return
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail(
            "npm is not installed: kafkajs cannot be installed (run scripts/dev.sh install)"
        )
    manifest.write_text(wanted)
    proc = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--no-package-lock", "--loglevel=error"],
        cwd=_CACHE,
        capture_output=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        manifest.unlink()
        pytest.fail(
            f"`npm install` of kafkajs into {_CACHE} failed ({proc.returncode}):\n"
            + proc.stderr.decode(errors="replace")
        )


@pytest.fixture(scope="session")
def kafkajs() -> Iterator[dict[str, str]]:
    """The environment under which ``node`` finds kafkajs."""
    node = shutil.which("node")
    if node is None:
        pytest.fail(
            "node is not installed: the kafkajs tests need Node.js (scripts/dev.sh install)"
        )
    _CACHE.mkdir(parents=True, exist_ok=True)
    with open(_CACHE / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _install_kafkajs()
    env = {**os.environ, "NODE_PATH": str(_CACHE / "node_modules")}
    probe = subprocess.run(
        [node, "-e", "const { Kafka } = require('kafkajs'); new Kafka({ brokers: ['x:1'] })"],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    if probe.returncode != 0:
        pytest.fail(
            f"kafkajs from {_CACHE} does not load under {node} (delete that directory to"
            " have it installed again):\n" + probe.stderr.decode(errors="replace")
        )
    yield env


