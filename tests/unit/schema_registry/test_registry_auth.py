"""Registry security: basic credentials checked against the SCRAM store, static
bearer tokens, per-subject roles, Confluent's 401 / 40301 bodies."""

from __future__ import annotations

import asyncio
import base64
import uuid
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ingest.security.credentials import MemoryCredentialStore
from ingest.security.scram import make_credential
from schema_registry.app import RegistrySettings, create_app
from schema_registry.auth import (
    Access,
    Grants,
    RegistryAuth,
    Role,
    parse_auth_modes,
    required_access,
    schema_id_of,
)

SCHEMA = '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}'


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@pytest.fixture
def client() -> TestClient:
    store = MemoryCredentialStore()
    store.put("alice", make_credential("alice-pw", "SCRAM-SHA-256"))
    store.put("bob", make_credential("bob-pw", "SCRAM-SHA-512"))
    store.put("root", make_credential("root-pw", "SCRAM-SHA-256"))
    store.put("nobody", make_credential("nobody-pw", "SCRAM-SHA-256"))
    settings = RegistrySettings(
        store_url="memory://",
        auth="basic,bearer",
        bearer_tokens={"tok-bob": "bob"},
        roles={"alice": ["write:orders-*"], "bob": ["read"], "root": ["admin"]},
    )
    return TestClient(create_app(settings, credentials=store))


def register(client: TestClient, subject: str, headers: dict[str, str]) -> int:
    r = client.post(f"/subjects/{subject}/versions", json={"schema": SCHEMA}, headers=headers)
    return r.status_code


def test_no_credentials_or_a_wrong_password_get_confluents_401(client: TestClient) -> None:
    r = client.get("/subjects")
    assert r.status_code == 401
    assert r.json() == {"error_code": 401, "message": "Unauthorized"}
    assert r.headers["www-authenticate"].startswith("Basic")
    assert client.get("/subjects", headers=basic("alice", "wrong")).status_code == 401
    assert client.get("/subjects", headers=basic("ghost", "alice-pw")).status_code == 401
    assert client.get("/subjects", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.get("/schemas/ids/1", headers={"Authorization": "Basic !!"}).status_code == 401


def test_roles_per_subject_prefix(client: TestClient) -> None:
    alice, bob, root = basic("alice", "alice-pw"), basic("bob", "bob-pw"), basic("root", "root-pw")
    assert register(client, "orders-value", alice) == 200
    # a prefix grant covers its subjects only
    r = client.post("/subjects/payments-value/versions", json={"schema": SCHEMA}, headers=alice)
    assert r.status_code == 403
    assert r.json()["error_code"] == 40301
    assert "payments-value" in r.json()["message"]
    # read-only: reads everywhere, registers nowhere
    assert client.get("/subjects/orders-value/versions/1", headers=bob).status_code == 200
    assert register(client, "orders-value", bob) == 403
    # compatibility is admin's
    body = {"compatibility": "FULL"}
    assert client.put("/config/orders-value", json=body, headers=alice).status_code == 403
    assert client.put("/config", json=body, headers=alice).status_code == 403
    assert client.put("/config/orders-value", json=body, headers=root).status_code == 200
    assert client.get("/config/orders-value", headers=bob).json()["compatibilityLevel"] == "FULL"
    # deletes need admin
    assert client.delete("/subjects/orders-value", headers=alice).status_code == 403
    assert client.delete("/subjects/orders-value", headers=root).status_code == 200
    # a user without any grant is authenticated but may do nothing
    assert client.get("/subjects", headers=basic("nobody", "nobody-pw")).status_code == 403


def test_a_static_bearer_token_acts_as_its_user(client: TestClient) -> None:
    headers = {"Authorization": "Bearer tok-bob"}
    assert client.get("/subjects", headers=headers).status_code == 200
    assert register(client, "orders-value", headers) == 403


def test_the_schema_by_id_fast_path_is_behind_the_check(client: TestClient) -> None:
    assert register(client, "orders-value", basic("alice", "alice-pw")) == 200
    ok = client.get("/schemas/ids/1", headers=basic("bob", "bob-pw"))
    assert ok.status_code == 200
    assert client.get("/schemas/ids/1").status_code == 401  # cached schema, still refused


def test_context_paths_are_checked_on_the_qualified_subject(client: TestClient) -> None:
    alice = basic("alice", "alice-pw")
    r = client.post(
        "/contexts/.team/subjects/orders-x/versions", json={"schema": SCHEMA}, headers=alice
    )
    assert r.status_code == 403  # ":.team:orders-x" is not under "orders-"


def test_default_is_open() -> None:
    client = TestClient(create_app(RegistrySettings(store_url="memory://")))
    assert client.get("/subjects").status_code == 200


def test_settings_refuse_unknown_modes_and_roles() -> None:
    with pytest.raises(ValueError):
        RegistrySettings(store_url="memory://", auth="digest")
    with pytest.raises(ValueError):
        RegistrySettings(store_url="memory://", roles={"a": ["owner"]})
    with pytest.raises(ValueError):
        create_app(RegistrySettings(store_url="memory://", auth="basic"))  # no user store
    assert parse_auth_modes("basic, bearer") == {"basic", "bearer"}
    assert parse_auth_modes("none") == frozenset()


def test_required_access_by_route() -> None:
    assert required_access("POST", "/subjects/a/versions") == Access(Role.WRITE, "a", "Write")
    assert required_access("POST", "/subjects/a").role is Role.READ  # lookup
    assert required_access("GET", "/subjects/a/versions/1").subject == "a"
    assert required_access("POST", "/compatibility/subjects/a/versions/latest").role is Role.READ
    assert required_access("PUT", "/mode/a") == Access(Role.ADMIN, "a", "AlterConfigs")
    assert required_access("DELETE", "/config") == Access(Role.ADMIN, None, "AlterConfigs")
    assert required_access("GET", "/schemas/ids/3") == Access(Role.READ, None, "Read")


def test_grants_literal_prefix_and_levels() -> None:
    grants = Grants({"u": ["read:exact", "write:team-*"]})
    assert grants.allows("u", Access(Role.READ, "exact", "Read"))
    assert not grants.allows("u", Access(Role.READ, "exact-2", "Read"))
    assert grants.allows("u", Access(Role.READ, "team-x", "Read"))  # write includes read
    assert not grants.allows("u", Access(Role.ADMIN, "team-x", "AlterConfigs"))
    assert not grants.allows("other", Access(Role.READ, None, "Read"))
    assert Grants({}).allows("anyone", Access(Role.ADMIN, None, "AlterConfigs"))


def test_lists_show_only_the_subjects_a_user_may_read(client: TestClient) -> None:
    root = basic("root", "root-pw")
    for subject in ("orders-value", "payments-value"):
        assert register(client, subject, root) == 200
    alice = basic("alice", "alice-pw")
    assert client.get("/subjects", headers=alice).json() == ["orders-value"]
    assert [s["subject"] for s in client.get("/schemas", headers=alice).json()] == ["orders-value"]
    assert client.get("/schemas/ids/1/subjects", headers=alice).json() == [
        "orders-value"
    ]  # the schema is shared by both subjects
    assert client.get("/subjects", headers=basic("bob", "bob-pw")).json() == [
        "orders-value",
        "payments-value",
    ]


def test_tls_files_are_checked_when_settings_load(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.pem")
    with pytest.raises(ValueError, match="cannot load"):
        RegistrySettings(store_url="memory://", ssl_certfile=missing)
    with pytest.raises(ValueError, match="ssl_certfile is not"):
        RegistrySettings(store_url="memory://", ssl_keyfile=missing)


def test_a_platform_issued_token_names_its_client() -> None:
    auth = RegistryAuth(frozenset({"bearer"}), None, token_verifier={"issued": "etl"}.get)
    assert asyncio.run(auth.authenticate("Bearer issued")) == "etl"
    assert asyncio.run(auth.authenticate("Bearer other")) is None
    assert asyncio.run(auth.authenticate("Basic YTpi")) is None  # basic is not on


OTHER = '{"type": "record", "name": "P", "fields": [{"name": "b", "type": "long"}]}'


def test_a_schema_id_reads_only_for_a_user_who_may_read_a_subject_holding_it(
    client: TestClient,
) -> None:
    root, alice, bob = basic("root", "root-pw"), basic("alice", "alice-pw"), basic("bob", "bob-pw")
    paid = client.post("/subjects/payments-value/versions", json={"schema": OTHER}, headers=root)
    ordered = client.post("/subjects/orders-value/versions", json={"schema": SCHEMA}, headers=root)
    payments_id, orders_id = paid.json()["id"], ordered.json()["id"]
    # bob reads every subject; his read also fills the fast path's cache
    assert client.get(f"/schemas/ids/{payments_id}", headers=bob).status_code == 200
    assert client.get(f"/schemas/ids/{orders_id}", headers=alice).status_code == 200
    for tail in ("", "/schema", "/subjects", "/versions"):
        refused = client.get(f"/schemas/ids/{payments_id}{tail}", headers=alice)
        assert refused.status_code == 403, tail
        assert refused.json() == {
            "error_code": 40301,
            "message": f"User alice is denied operation Read on Schema: {payments_id}",
        }
    # an unknown id is the registry's 40403, as for anyone
    missing = client.get("/schemas/ids/999", headers=alice)
    assert (missing.status_code, missing.json()["error_code"]) == (404, 40403)
    # once a subject she may read holds the schema too, she may read it
    assert register(client, "orders-extra-value", alice) == 200  # SCHEMA again: orders_id
    shared = client.post("/subjects/orders-p-value/versions", json={"schema": OTHER}, headers=root)
    assert shared.json()["id"] == payments_id
    assert client.get(f"/schemas/ids/{payments_id}", headers=alice).status_code == 200
    assert client.get(f"/schemas/ids/{payments_id}/subjects", headers=alice).json() == [
        "orders-p-value"
    ]
    assert client.get(f"/schemas/ids/{payments_id}/subjects", headers=bob).json() == [
        "orders-p-value",
        "payments-value",
    ]


def test_a_schema_guid_reads_only_for_a_user_who_may_read_a_subject_holding_it(
    client: TestClient,
) -> None:
    root, alice, bob = basic("root", "root-pw"), basic("alice", "alice-pw"), basic("bob", "bob-pw")
    paid = client.post("/subjects/payments-value/versions", json={"schema": OTHER}, headers=root)
    ordered = client.post("/subjects/orders-value/versions", json={"schema": SCHEMA}, headers=root)
    payments_guid, orders_guid = paid.json()["guid"], ordered.json()["guid"]
    assert client.get(f"/schemas/guids/{orders_guid}", headers=alice).status_code == 200
    refused = client.get(f"/schemas/guids/{payments_guid}", headers=alice)
    assert (refused.status_code, refused.json()["error_code"]) == (403, 40301)
    assert client.get(f"/schemas/guids/{payments_guid}", headers=bob).status_code == 200
    unknown = client.get(f"/schemas/guids/{uuid.uuid4()}", headers=alice)
    assert (unknown.status_code, unknown.json()["error_code"]) == (404, 40403)


def test_a_soft_deleted_version_still_lets_its_readers_read_the_id(client: TestClient) -> None:
    root, alice = basic("root", "root-pw"), basic("alice", "alice-pw")
    made = client.post("/subjects/orders-value/versions", json={"schema": SCHEMA}, headers=root)
    schema_id = made.json()["id"]
    assert register(client, "payments-value", root) == 200  # the same id, live
    assert client.delete("/subjects/orders-value/versions/1", headers=root).status_code == 200
    assert client.get(f"/schemas/ids/{schema_id}", headers=alice).status_code == 200
    assert client.delete("/subjects/orders-value/versions/1?permanent=true", headers=root)
    assert client.get(f"/schemas/ids/{schema_id}", headers=alice).status_code == 403


def test_a_schema_id_in_a_context_is_checked_on_the_contexts_subjects() -> None:
    store = MemoryCredentialStore()
    store.put("root", make_credential("root-pw", "SCRAM-SHA-256"))
    store.put("team", make_credential("team-pw", "SCRAM-SHA-256"))
    settings = RegistrySettings(
        store_url="memory://",
        auth="basic",
        roles={"root": ["admin"], "team": ["read::.team:*"]},
    )
    client = TestClient(create_app(settings, credentials=store))
    root, team = basic("root", "root-pw"), basic("team", "team-pw")
    made = client.post(
        "/contexts/.team/subjects/orders/versions", json={"schema": SCHEMA}, headers=root
    )
    assert made.status_code == 200
    plain = client.post("/subjects/orders/versions", json={"schema": OTHER}, headers=root)
    assert made.json()["id"] == plain.json()["id"] == 1  # one id in each context
    assert client.get("/contexts/.team/schemas/ids/1", headers=team).status_code == 200
    assert client.get("/schemas/ids/1", headers=team).status_code == 403  # the default's


def test_schema_id_of_names_reads_by_id_only() -> None:
    assert schema_id_of("GET", "/schemas/ids/7") == 7
    for tail in ("/schema", "/subjects", "/versions"):
        assert schema_id_of("GET", f"/schemas/ids/7{tail}") == 7
    assert schema_id_of("POST", "/schemas/ids/7") is None
    assert schema_id_of("GET", "/schemas/ids/7/other") is None
    assert schema_id_of("GET", "/subjects/a/versions/1") is None
    assert schema_id_of("GET", "/schemas/guids/abc") == "abc"
    assert schema_id_of("GET", "/schemas/guids/abc/x") is None
    assert Grants({"u": ["read"], "v": ["admin:x"]}).reads_every_subject("u")
    assert not Grants({"u": ["read"], "v": ["admin:x"]}).reads_every_subject("v")
    assert Grants({}).reads_every_subject("anyone")
