"""Free ports on 127.0.0.1 and waiting for listeners.

A port from ``bind(("127.0.0.1", 0))`` is free only at the moment it is
asked for: the kernel may hand the same number to the next caller, to another
pytest worker or to an outgoing connection before the server that was meant
to use it binds it. CI saw exactly that (a broker whose Kafka and registry
ports came back equal). So, where the host's ephemeral range allows it, ports
come from a block below that range that belongs to this process alone (one
block per xdist worker), are handed out once each, and are checked with a
real bind before they are handed out. Outgoing connections never take a port
outside the ephemeral range, and two workers never share a block.
"""

from __future__ import annotations

import os
import random
import socket
import threading
import time

__all__ = ["free_port", "wait_for_port"]

_BLOCK = 1500
_FIRST = 15000
_BLOCKS = 8
_lock = threading.Lock()
_handed: set[int] = set()
_next: int | None = None


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ...
    digits = worker[2:] if worker.startswith("gw") else ""
    return int(digits) % (_BLOCKS - 1) + 1 if digits.isdigit() else 0


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _from_block() -> int | None:
    global _next
    base = _FIRST + _worker_index() * _BLOCK
    if _next is None:  # a random start, so back-to-back runs do not reuse ports
        _next = base + random.randrange(_BLOCK)
    for _ in range(_BLOCK):
        port = _next
        _next = base + (_next - base + 1) % _BLOCK
        if port not in _handed and _bindable(port):
            return port
    return None


def _from_kernel() -> int:
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _handed:
            return port
    raise OSError("no free port on 127.0.0.1")


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on and that this process has
    not handed out before."""
    with _lock:
        port = None
        if _ephemeral_low() >= _FIRST + _BLOCKS * _BLOCK:
            port = _from_block()
        if port is None:
            port = _from_kernel()
        _handed.add(port)
        return port


def wait_for_port(port: int, timeout: float = 30.0, host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")
