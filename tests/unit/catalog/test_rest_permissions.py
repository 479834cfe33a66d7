"""Per-namespace grants of OAuth2 clients on the REST catalog: read / write per
namespace prefix, 403 ForbiddenException otherwise; static tokens keep full access."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from catalog.app import create_app
from catalog.config import CatalogSettings
from catalog.rest.permissions import CatalogAccess, NamespaceGrants

TABLE = {
    "name": "t",
    "schema": {
        "type": "struct",
        "schema-id": 0,
        "fields": [{"id": 1, "name": "a", "type": "int", "required": False}],
    },
}


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    settings = CatalogSettings(
        data_dir=tmp_path,
        serve_tokens=["static-admin"],
        serve_oauth2_clients={"etl": "etl-pw", "bi": "bi-pw", "none": "none-pw"},
        serve_oauth2_permissions={"etl": ["write:sales"], "bi": ["read"]},
    )
    return TestClient(create_app(settings))


def login(client: TestClient, name: str) -> dict[str, str]:
    form = {"grant_type": "client_credentials", "client_id": name, "client_secret": f"{name}-pw"}
    token = client.post("/v1/oauth/tokens", data=form).json()["access_token"]
    return {"Authorization": f"Bearer {token}"}


def test_write_grant_covers_its_namespace_and_children_only(client: TestClient) -> None:
    etl = login(client, "etl")
    assert (
        client.post("/v1/namespaces", json={"namespace": ["sales"]}, headers=etl).status_code == 200
    )
    ok = client.post("/v1/namespaces", json={"namespace": ["sales", "eu"]}, headers=etl)
    assert ok.status_code == 200
    r = client.post("/v1/namespaces", json={"namespace": ["hr"]}, headers=etl)
    assert r.status_code == 403
    assert r.json()["error"]["type"] == "ForbiddenException"
    assert r.json()["error"]["code"] == 403
    created = client.post("/v1/namespaces/sales%1Feu/tables", json=TABLE, headers=etl)
    assert created.status_code == 200, created.text
    assert client.get("/v1/namespaces/sales%1Feu/tables/t", headers=etl).status_code == 200


def test_read_grant_reads_but_cannot_write(client: TestClient) -> None:
    admin = {"Authorization": "Bearer static-admin"}
    assert (
        client.post("/v1/namespaces", json={"namespace": ["hr"]}, headers=admin).status_code == 200
    )
    assert client.post("/v1/namespaces/hr/tables", json=TABLE, headers=admin).status_code == 200
    bi = login(client, "bi")
    assert client.get("/v1/namespaces", headers=bi).status_code == 200
    assert client.get("/v1/namespaces/hr/tables/t", headers=bi).status_code == 200
    assert client.delete("/v1/namespaces/hr/tables/t", headers=bi).status_code == 403
    assert client.post("/v1/namespaces", json={"namespace": ["x"]}, headers=bi).status_code == 403
    # a client with no grants at all may do nothing, not even list
    assert client.get("/v1/namespaces", headers=login(client, "none")).status_code == 403
    # and the etl client cannot read outside its namespace
    assert client.get("/v1/namespaces/hr/tables/t", headers=login(client, "etl")).status_code == 403


def test_grant_rules() -> None:
    grants = NamespaceGrants({"c": ["read:team_*", "write:db.raw"]})
    assert grants.allows("c", CatalogAccess.READ, ("team_a", "x"))
    assert not grants.allows("c", CatalogAccess.WRITE, ("team_a",))
    assert grants.allows("c", CatalogAccess.WRITE, ("db", "raw", "y"))
    assert not grants.allows("c", CatalogAccess.WRITE, ("db", "rawer"))
    assert not grants.allows("c", CatalogAccess.WRITE, None)  # rename: needs every namespace
    assert grants.allows(None, CatalogAccess.WRITE, None)  # static token
    assert NamespaceGrants().allows("anyone", CatalogAccess.WRITE, ("x",))
    with pytest.raises(ValueError):
        NamespaceGrants({"c": ["admin"]})


def test_a_bad_grant_is_refused_when_settings_load() -> None:
    with pytest.raises(ValueError, match="expected read or write"):
        CatalogSettings(serve_oauth2_permissions={"c": ["owner:x"]})
