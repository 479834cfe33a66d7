"""Start an ASGI app under uvicorn in its own process, for benchmarks.

The app runs in a separate interpreter so that the benchmark's clients and the
server do not share a GIL; it binds 127.0.0.1 on a free port.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.net import free_port

__all__ = ["start_app_server"]

REPO = Path(__file__).resolve().parents[1]


def start_app_server(
    code: str, arg: str, probe_path: str, what: str
) -> tuple[subprocess.Popen[bytes], str]:
    """Run ``code`` (which reads ``sys.argv[1]`` = ``arg`` and ``sys.argv[2]`` =
    the port) and wait until ``GET probe_path`` answers 200."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", code, arg, str(port)], env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(url + probe_path, timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.1)
