"""Run protoc (grpcio-tools) in one long-lived helper process.

Starting ``python -m grpc_tools.protoc`` costs about 90 ms; a warm helper answers
in a few. The helper runs protoc in-process with its own stderr captured per call,
so nothing of ours redirects this process's file descriptors. Calls are serialised;
if the helper dies, the call falls back to a one-off subprocess and the next call
starts a fresh helper.
"""

from __future__ import annotations

import atexit
import json
import select
import subprocess
import sys
import threading
from typing import IO, Any

__all__ = ["run_protoc"]

_TIMEOUT_S = 60.0

_WORKER = r"""
import json, os, sys, tempfile
from grpc_tools import protoc
reply = os.fdopen(os.dup(1), "w")
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
for line in sys.stdin:
    request = json.loads(line)
    with tempfile.TemporaryFile() as err:
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            os.chdir(request["cwd"])
            rc = protoc.main(["protoc", *request["args"]])
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
        except Exception as exc:
            rc, request["error"] = 1, repr(exc)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        message = err.read().decode("utf-8", "replace") + request.get("error", "")
    reply.write(json.dumps({"rc": rc, "stderr": message}) + "\n")
    reply.flush()
"""


class _Helper:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        atexit.register(self.stop)
        return proc

    def run(self, args: list[str], cwd: str) -> tuple[int, str]:
        with self._lock:
            try:
                if self._proc is None or self._proc.poll() is not None:
                    self._proc = self._start()
                stdin: IO[str] = self._proc.stdin  # type: ignore[assignment]
                stdout: IO[str] = self._proc.stdout  # type: ignore[assignment]
                stdin.write(json.dumps({"args": args, "cwd": cwd}) + "\n")
                stdin.flush()
                ready, _, _ = select.select([stdout], [], [], _TIMEOUT_S)
                if not ready:
                    raise TimeoutError("protoc helper did not answer")
                line = stdout.readline()
                if not line:
                    raise BrokenPipeError("protoc helper exited")
                reply: dict[str, Any] = json.loads(line)
                return int(reply["rc"]), str(reply["stderr"])
            except (OSError, ValueError):
                self.stop_locked()
        done = subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", *args],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            cwd=cwd,
        )
        return done.returncode, done.stderr or done.stdout

    def stop_locked(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def stop(self) -> None:
        with self._lock:
            self.stop_locked()


_HELPER = _Helper()


def run_protoc(args: list[str], cwd: str) -> tuple[int, str]:
    """Run ``protoc <args>`` in ``cwd``; returns (exit code, error output)."""
    return _HELPER.run(args, cwd)
