from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from schema_registry.app import RegistrySettings, create_app


@pytest.fixture
def client() -> Iterator[TestClient]:
    app = create_app(RegistrySettings(store_url="memory://", max_body_bytes=64 * 1024))
    with TestClient(app) as c:
        yield c


def avro_record(name: str = "User", *fields: dict[str, object]) -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields)})
