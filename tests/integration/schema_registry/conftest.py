from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from schema_registry.app import RegistrySettings, create_app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RunningRegistry:
    """The registry app served by uvicorn on 127.0.0.1 in a background thread."""

    def __init__(self, settings: RegistrySettings) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            create_app(settings),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> RunningRegistry:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("registry did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


def sqlite_settings(path: Path) -> RegistrySettings:
    return RegistrySettings(store_url=f"sqlite:///{path}", max_body_bytes=1024 * 1024)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRegistry]:
    path = tmp_path_factory.mktemp("registry") / "schemas.db"
    with RunningRegistry(sqlite_settings(path)) as running:
        yield running
