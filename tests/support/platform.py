"""Run ``tidelake serve`` as a real process on free ports, for tests.

The process binds 127.0.0.1 only and is stopped (SIGTERM, or kill -9 where a
test wants a crash) by the test that started it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from tests.support.net import free_port, wait_for_port

__all__ = ["TidelakeProcess"]


class _PortTaken(RuntimeError):
    """The broker could not bind a port that was free when it was chosen."""


class TidelakeProcess:
    def __init__(
        self,
        data_dir: Path,
        *,
        env: dict[str, str] | None = None,
        config_file: Path | None = None,
        kafka_port: int | None = None,
        registry_port: int | None = None,
        http_port: int | None = None,
        tree: Path | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        # the checkout it runs from (a bench's baseline worktree); this one by default
        self.tree = tree if tree is not None else Path(__file__).resolve().parents[2]
        self._started = False
        self._ports_chosen_here = not (kafka_port or registry_port or http_port)
        self.kafka_port = kafka_port or free_port()
        self.registry_port = registry_port or free_port()
        self.http_port = http_port or free_port()
        self.extra_env = dict(env or {})
        self.config_file = config_file
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}-tidelake.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def registry_url(self) -> str:
        return f"http://127.0.0.1:{self.registry_port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start(self, timeout: float = 60.0) -> TidelakeProcess:
        """Start and wait for all three listeners. Where this class chose the
        ports and one was taken in between (another process bound it after
        ``free_port`` looked), the first start tries again on fresh ports, up
        to 3 times; a restart keeps the ports its clients know."""
        for attempt in range(3):
            try:
                self._start_once(timeout)
                self._started = True
                return self
            except _PortTaken:
                if not self._ports_chosen_here or self._started or attempt == 2:
                    raise
                self.kafka_port, self.registry_port, self.http_port = (
                    free_port(),
                    free_port(),
                    free_port(),
                )
        raise AssertionError("unreachable")

    def _start_once(self, timeout: float) -> TidelakeProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.setdefault("TIDELAKE_BROKER_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
        env.update(self.extra_env)
        cmd = [
            sys.executable,
            "-m",
            "api.cli",
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--kafka-listen",
            self.bootstrap,
            "--registry-listen",
            f"127.0.0.1:{self.registry_port}",
            "--http-listen",
            f"127.0.0.1:{self.http_port}",
        ]
        if self.config_file is not None:
            cmd += ["--config", str(self.config_file)]
        self._log = open(self.log_path, "ab")
        log_start = self._log.tell()
        self.proc = subprocess.Popen(
            cmd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(self.tree),
        )
        deadline = time.monotonic() + timeout
        for port in (self.kafka_port, self.registry_port, self.http_port):
            while True:
                if self.proc.poll() is not None:
                    self._close_log()
                    tail = self.log_tail()
                    this_run = self.log_path.read_bytes()[log_start:]
                    error = _PortTaken if b"Address already in use" in this_run else RuntimeError
                    raise error(f"tidelake exited with {self.proc.returncode}:\n{tail}")
                try:
                    wait_for_port(port, timeout=0.5)
                    break
                except TimeoutError:
                    if time.monotonic() > deadline:
                        self.kill()
                        raise TimeoutError(
                            f"tidelake did not listen on {port}:\n{self.log_tail()}"
                        ) from None
        return self

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        self._close_log()
        return code

    def kill(self) -> None:
        """kill -9: a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> TidelakeProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
