"""The test harness's free ports: CI once started a broker whose Kafka and
registry ports came back equal, and the broker could not start."""

from __future__ import annotations

import ast
import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.support.net import free_port

REPO = Path(__file__).resolve().parents[3]


def test_a_process_is_never_handed_the_same_port_twice() -> None:
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)


def test_a_handed_out_port_can_be_listened_on() -> None:
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        assert s.getsockname()[1] == port


def test_two_pytest_workers_are_never_handed_the_same_port() -> None:
    code = "from tests.support.net import free_port; print([free_port() for _ in range(200)])"
    handed = []
    for worker in ("gw0", "gw1"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTEST_XDIST_WORKER": worker},
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        handed.append(set(ast.literal_eval(out)))
    assert len(handed[0]) == len(handed[1]) == 200
    assert not handed[0] & handed[1]
