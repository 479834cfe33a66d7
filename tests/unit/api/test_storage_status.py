"""``tidelake tables status`` prints the object storage's health line."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from api.commands import tables


def test_status_line_shows_degraded_storage_with_error_rate_and_last_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = {
        "state": "degraded",
        "window_s": 10.0,
        "error_rate": 0.2,
        "slowest_ms": 2780.0,
        "last_error": "PutObject: 503 SlowDown",
        "last_error_at": "2026-01-01T00:00:00Z",
        "pending_upload_bytes": 524288,
        "produce_throttle_ms": 500,
    }

    def get(url: str, **_: Any) -> httpx.Response:
        assert url == "http://h:1/api/v1/storage"
        return httpx.Response(200, json=body, request=httpx.Request("GET", url))

    monkeypatch.setattr(httpx, "get", get)
    line = tables._storage_line("http://h:1/")
    assert line.startswith("object storage: degraded, error rate 20.0% over 10 s")
    assert "slowest 2780 ms" in line and "produce throttled 500 ms" in line
    assert "last error (2026-01-01T00:00:00Z): PutObject: 503 SlowDown" in line


def test_status_line_survives_a_server_without_the_storage_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def get(url: str, **_: Any) -> httpx.Response:
        return httpx.Response(404, request=httpx.Request("GET", url))

    monkeypatch.setattr(httpx, "get", get)
    assert tables._storage_line("http://h:1").startswith("object storage: unknown")
