"""HTTP listeners are bound by the platform itself, so a port taken after
``serve`` checked it is an OSError (printed as one line), not uvicorn exiting
the process from inside its task."""

from __future__ import annotations

import socket

import pytest

from api.process import bind_listener


def test_a_free_port_is_bound_and_a_taken_one_is_an_os_error() -> None:
    first = bind_listener("127.0.0.1:0")
    try:
        first.listen()
        port = first.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            bind_listener(f"127.0.0.1:{port}")
    finally:
        first.close()
    again = bind_listener(f"127.0.0.1:{port}")  # free again once closed
    assert again.family == socket.AF_INET
    again.close()
