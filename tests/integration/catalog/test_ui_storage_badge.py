"""The web page shows the platform's object storage health: green while healthy,
red with the error rate and the last error while degraded (issue #14, item 9)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI

from catalog.ui import create_ui_router
from tests.integration.catalog.test_ui_chromium import render
from tests.support.net import free_port, wait_for_port
from tests.support.platform import TidelakeProcess

DEGRADED: dict[str, Any] = {
    "state": "degraded",
    "error_rate": 0.2,
    "last_error": "PutObject: 503 SlowDown",
}


def test_a_running_platform_shows_healthy_object_storage(tmp_path: Path) -> None:
    with TidelakeProcess(tmp_path / "data") as platform:
        page = render(f"{platform.http_url}/ui/")
    assert page.text("storage") == "object storage: healthy"


@pytest.fixture
def degraded_page() -> Iterator[str]:
    """The page as `tidelake serve` serves it, next to a storage endpoint that
    reports what the health tracker reports under 20 % 503s."""
    app = FastAPI()
    app.include_router(create_ui_router())

    @app.get("/api/v1/storage")
    def storage() -> dict[str, Any]:
        return DEGRADED

    @app.get("/api/v1/catalog/namespaces")
    def namespaces() -> list[Any]:
        return []

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for_port(port)
    try:
        yield f"http://127.0.0.1:{port}/ui/"
    finally:
        server.should_exit = True
        thread.join(10)


def test_degraded_object_storage_shows_its_error_rate_and_last_error(degraded_page: str) -> None:
    page = render(degraded_page)
    assert page.text("storage") == (
        "object storage: degraded (20 % errors; last: PutObject: 503 SlowDown)"
    )
