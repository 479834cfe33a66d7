"""Ids, versions and numbers outside what the registry stores get Confluent's errors, never 500.

Run over the SQLite store (the embedded default): SQLite refuses integers beyond 64 bits and
PostgreSQL beyond 32, so an unchecked value reaches the database and fails there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from schema_registry.app import RegistrySettings, create_app
from tests.unit.schema_registry.conftest import avro_record
from tests.unit.schema_registry.test_api import error, register

V1 = avro_record("User", {"name": "id", "type": "long"})
HUGE = [2**31, 2**63, 2**64, 10**30]


@pytest.fixture(params=["memory", "sqlite"])
def store_client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestClient]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'registry.db'}"
    with TestClient(create_app(RegistrySettings(store_url=url))) as client:
        yield client


ID_PATHS = ["", "/schema", "/subjects", "/versions"]


def test_unknown_schema_id_of_any_size_is_40403(store_client: TestClient) -> None:
    register(store_client, "s", V1)
    for schema_id in [*HUGE, -1, -(2**70), 0]:
        for suffix in ID_PATHS:
            for query in ("", "?subject=s", "?format=resolved"):
                url = f"/schemas/ids/{schema_id}{suffix}{query}"
                error(store_client.get(url), 404, 40403)
    assert store_client.get("/schemas/ids/1").status_code == 200


def test_non_numeric_schema_id_is_404(store_client: TestClient) -> None:
    for suffix in ID_PATHS:
        error(store_client.get(f"/schemas/ids/abc{suffix}"), 404, 404)
        error(store_client.get(f"/schemas/ids/1.5{suffix}"), 404, 404)


def test_invalid_versions_are_42202_on_every_version_path(store_client: TestClient) -> None:
    register(store_client, "s", V1)
    body = {"schema": V1}
    for version in [*map(str, HUGE), "-2", "0", "1.0", "x", "-9223372036854775809"]:
        base = f"/subjects/s/versions/{version}"
        error(store_client.get(base), 422, 42202)
        error(store_client.get(f"{base}/schema"), 422, 42202)
        error(store_client.get(f"{base}/referencedby"), 422, 42202)
        error(store_client.delete(base), 422, 42202)
        error(store_client.post(f"/compatibility{base}", json=body), 422, 42202)


def test_latest_and_minus_one_name_the_latest_version(store_client: TestClient) -> None:
    register(store_client, "s", V1)
    for latest in ("latest", "-1", "LATEST"):
        r = store_client.get(f"/subjects/s/versions/{latest}")
        assert r.status_code == 200 and r.json()["version"] == 1
        assert store_client.get(f"/subjects/s/versions/{latest}/referencedby").json() == []


def test_unknown_subject_with_valid_version_is_40401(store_client: TestClient) -> None:
    error(store_client.get("/subjects/none/versions/2147483647"), 404, 40401)
    error(store_client.get("/subjects/none/versions/latest/referencedby"), 404, 40401)


def test_register_with_an_out_of_range_id_or_version_is_422(store_client: TestClient) -> None:
    r = store_client.put("/mode", json={"mode": "IMPORT"})
    assert r.status_code == 200, r.text
    for field in ("id", "version"):
        for value in HUGE:
            body = {"schema": V1, "id": 7, "version": 1, field: value}
            error(store_client.post("/subjects/s/versions", json=body), 422, 42201)
    assert store_client.get("/subjects").json() == []


def test_reference_version_out_of_range_is_42201(store_client: TestClient) -> None:
    register(store_client, "dep", V1)
    for value in HUGE:
        body = {
            "schema": avro_record("Outer", {"name": "u", "type": "User"}),
            "references": [{"name": "User", "subject": "dep", "version": value}],
        }
        error(store_client.post("/subjects/s/versions", json=body), 422, 42201)


def test_huge_paging_values_are_served(store_client: TestClient) -> None:
    register(store_client, "s", V1)
    assert store_client.get(f"/schemas?offset={2**70}").json() == []
    assert len(store_client.get(f"/schemas?limit={2**70}").json()) == 1
    assert len(store_client.get(f"/schemas?offset=-{2**70}").json()) == 1
