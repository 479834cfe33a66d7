"""The registry publishes an OpenAPI document that describes what it really serves."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.routing import Route

BODY_ROUTES = {
    ("post", "/subjects/{subject}/versions"): "SchemaBody",
    ("post", "/subjects/{subject}"): "SchemaBody",
    ("post", "/compatibility/subjects/{subject}/versions"): "SchemaBody",
    ("post", "/compatibility/subjects/{subject}/versions/{version}"): "SchemaBody",
    ("put", "/config"): "ConfigBody",
    ("put", "/config/{subject}"): "ConfigBody",
    ("put", "/mode"): "ModeBody",
    ("put", "/mode/{subject}"): "ModeBody",
}


@pytest.fixture
def doc(client: TestClient) -> dict[str, Any]:
    r = client.get("/openapi.json")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def test_openapi_document_is_valid(doc: dict[str, Any]) -> None:
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(doc)
    assert doc["openapi"].startswith("3.")


def test_every_route_is_documented(client: TestClient, doc: dict[str, Any]) -> None:
    for route in client.app.routes:  # type: ignore[attr-defined]
        if not isinstance(route, Route) or route.path == "/openapi.json":
            continue
        path = route.path.replace(":path}", "}")
        for method in route.methods or ():
            if method != "HEAD":
                assert method.lower() in doc["paths"][path], (method, path)


def test_request_bodies_are_described(doc: dict[str, Any]) -> None:
    for (method, path), model in BODY_ROUTES.items():
        body = doc["paths"][path][method]["requestBody"]
        assert body["required"] is True
        for media in ("application/vnd.schemaregistry.v1+json", "application/json"):
            assert body["content"][media]["schema"] == {"$ref": f"#/components/schemas/{model}"}
    schema_body = doc["components"]["schemas"]["SchemaBody"]
    assert schema_body["required"] == ["schema"]
    assert {"schema", "schemaType", "references", "metadata", "ruleSet"} <= set(
        schema_body["properties"]
    )


def test_errors_are_described_in_confluent_shape(doc: dict[str, Any]) -> None:
    error_body = doc["components"]["schemas"]["ErrorBody"]
    assert set(error_body["required"]) == {"error_code", "message"}
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            for status in ("400", "404", "500"):
                content = operation["responses"][status]["content"]
                schema = content["application/vnd.schemaregistry.v1+json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (method, path)
    register = doc["paths"]["/subjects/{subject}/versions"]["post"]["responses"]
    assert {"200", "409", "413", "422"} <= set(register)


def test_success_bodies_are_described(doc: dict[str, Any]) -> None:
    def ok(method: str, path: str) -> Any:
        content = doc["paths"][path][method]["responses"]["200"]["content"]
        return content["application/vnd.schemaregistry.v1+json"]["schema"]

    assert ok("get", "/schemas/ids/{schema_id}") == {"$ref": "#/components/schemas/SchemaById"}
    assert ok("get", "/subjects/{subject}/versions/{version}") == {
        "$ref": "#/components/schemas/SubjectVersionSchema"
    }
    assert ok("post", "/subjects/{subject}/versions") == {"$ref": "#/components/schemas/Registered"}
    assert ok("get", "/subjects")["items"] == {"type": "string"}
