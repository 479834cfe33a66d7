"""What fuzzing the registry's OpenAPI document (tests/fuzz/test_registry_schemathesis.py)
found, one regression test each: the answer Confluent's registry gives, never a 5xx or an
answer the document does not describe."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.unit.schema_registry.test_api import error


@pytest.mark.parametrize(
    "body",
    [
        {"normalize": {}},
        {"compatibility": "FULL", "normalize": "yes"},
        {"validateFields": 1},
        {"alias": 5},
        {"defaultMetadata": "x"},
        {"overrideRuleSet": []},
    ],
)
def test_config_fields_of_the_wrong_type_are_422_and_not_stored(
    client: TestClient, body: dict[str, object]
) -> None:
    error(client.put("/config", json=body), 422, 422)
    error(client.put("/config/s", json=body), 422, 422)
    assert client.get("/config").json() == {"compatibilityLevel": "BACKWARD"}
    error(client.get("/config/s"), 404, 40408)


def test_config_fields_of_the_right_type_are_kept(client: TestClient) -> None:
    body = {"compatibility": "FULL", "normalize": True, "alias": "other", "validateFields": None}
    assert client.put("/config/s", json=body).status_code == 200
    got = client.get("/config/s").json()
    assert got["compatibilityLevel"] == "FULL" and got["normalize"] is True
    assert got["alias"] == "other"


def test_method_not_allowed_names_the_allowed_methods(client: TestClient) -> None:
    r = client.post("/schemas/types")
    error(r, 405, 405)
    assert r.headers["allow"] == "GET"
    r = client.patch("/config")
    error(r, 405, 405)
    assert r.headers["allow"] == "GET, PUT, DELETE"


def test_a_mode_for_a_subject_no_schema_can_have_is_refused(client: TestClient) -> None:
    error(client.put("/mode/a%00b", json={"mode": "READONLY"}), 422, 42208)
    error(client.put("/mode/a%01b", json={"mode": "READONLY"}), 422, 42208)
    error(client.get("/mode/a%00b"), 404, 40409)
    assert client.put("/mode/ok", json={"mode": "READONLY"}).json() == {"mode": "READONLY"}
