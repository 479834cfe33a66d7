"""Fixtures: the catalog app served by uvicorn on 127.0.0.1 and clients for it."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from pyiceberg.catalog.rest import RestCatalog

from catalog.app import create_app
from catalog.config import CatalogSettings

SPEC_PATH = (
    Path(__file__).resolve().parents[3].parent
    / "shared"
    / "specs"
    / "iceberg-rest-catalog-open-api.yaml"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(app: FastAPI) -> Iterator[str]:
    """Run ``app`` with uvicorn in a thread; yield its base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tidelake-data")


@pytest.fixture(scope="session")
def server_url(data_dir: Path) -> Iterator[str]:
    with serve(create_app(CatalogSettings(data_dir=data_dir))) as url:
        yield url


@pytest.fixture
def rest(server_url: str) -> RestCatalog:
    return RestCatalog("tidelake", uri=server_url)


@pytest.fixture
def http(server_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server_url, timeout=30) as client:
        yield client


@pytest.fixture
def ns(rest: RestCatalog) -> str:
    """A fresh namespace for one test."""
    name = f"ns_{uuid.uuid4().hex[:10]}"
    rest.create_namespace(name)
    return name


@pytest.fixture(scope="session")
def spec() -> dict[str, Any] | None:
    if not SPEC_PATH.exists():
        return None
    import yaml

    with SPEC_PATH.open() as fh:
        loaded: dict[str, Any] = yaml.safe_load(fh)
    return loaded


def check_schema(spec: dict[str, Any] | None, name: str, instance: Any) -> None:
    """Validate ``instance`` against the spec's ``components/schemas/<name>`` (if the spec is here)."""
    if spec is None:
        return
    from openapi_schema_validator import OAS30Validator

    schema = {"$ref": f"#/components/schemas/{name}", "components": spec["components"]}
    OAS30Validator(schema).validate(instance)


def assert_error(
    response: httpx.Response, code: int, type_: str, spec: dict[str, Any] | None
) -> None:
    assert response.status_code == code, response.text
    body = response.json()
    assert body["error"]["code"] == code
    assert body["error"]["type"] == type_, body
    assert body["error"]["message"]
    check_schema(spec, "IcebergErrorResponse", body)
