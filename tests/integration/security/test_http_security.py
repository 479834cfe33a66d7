"""Security on the HTTP listeners of one real ``tidelake serve``: the schema
registry (HTTPS, basic + bearer, per-subject roles) with Confluent's
SchemaRegistryClient, the Iceberg REST catalog (HTTPS, OAuth2 client
credentials with a short token lifetime, per-namespace grants) with pyiceberg,
and the admin API / web console (HTTPS, basic login) with httpx and headless
Chromium. Users are made with ``tidelake users create``: the same users as Kafka's SASL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError
from pyiceberg.schema import Schema as IcebergSchema
from pyiceberg.types import LongType, NestedField

from tests.integration.security.certs import TestPki, make_pki
from tests.integration.security.conftest import users_cli
from tests.support.chromium import dump_dom
from tests.support.platform import TidelakeProcess

AVRO = '{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}'
USERS = {"alice": "alice-pw-1", "bob": "bob-pw-1", "root": "root-pw-1"}
TOKEN_LIFETIME_S = 2


@dataclass(frozen=True)
class Secured:
    proc: TidelakeProcess
    pki: TestPki

    @property
    def registry(self) -> str:
        return f"https://localhost:{self.proc.registry_port}"

    @property
    def http(self) -> str:
        return f"https://localhost:{self.proc.http_port}"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("httpsec")
    pki = make_pki(root / "pki")
    data = root / "data"
    data.mkdir()
    for user, password in USERS.items():
        made = users_cli(data, "create", user, "--password", password)
        assert made.returncode == 0, made.stderr
    proc = TidelakeProcess(data)
    tls = f'ssl_certfile = "{pki.server_cert}"\nssl_keyfile = "{pki.server_key}"'
    config = root / "tidelake.toml"
    config.write_text(
        f"""
[registry]
auth = "basic,bearer"
bearer_tokens = {{ "static-token-of-bob" = "bob" }}
roles = {{ alice = ["write:orders-*"], bob = ["read"], root = ["admin"], etl = ["read"] }}
{tls}

[http]
auth = "basic"
{tls}

[catalog]
serve_oauth2_clients = {{ etl = "etl-secret", bi = "bi-secret" }}
serve_oauth2_permissions = {{ etl = ["write:sales"], bi = ["read"] }}
serve_token_lifetime_seconds = {TOKEN_LIFETIME_S}
"""
    )
    proc.config_file = config
    proc.start()
    try:
        yield Secured(proc, pki)
    finally:
        proc.stop()


def registry_client(s: Secured, user: str, password: str) -> SchemaRegistryClient:
    return SchemaRegistryClient(
        {
            "url": s.registry,
            "ssl.ca.location": str(s.pki.ca),
            "basic.auth.user.info": f"{user}:{password}",
        }
    )


# -- schema registry -----------------------------------------------------------


def test_registry_users_work_within_their_roles(secured: Secured) -> None:
    alice = registry_client(secured, "alice", USERS["alice"])
    schema_id = alice.register_schema("orders-value", Schema(AVRO, "AVRO"))
    assert alice.get_latest_version("orders-value").schema_id == schema_id
    bob = registry_client(secured, "bob", USERS["bob"])
    assert bob.get_schema(schema_id).schema_str is not None
    assert "orders-value" in bob.get_subjects()
    root = registry_client(secured, "root", USERS["root"])
    answer: Any = root.set_compatibility("orders-value", "FULL")
    assert answer["compatibility"] == "FULL"
    assert bob.get_compatibility("orders-value") == "FULL"


def test_registry_refuses_a_wrong_password_with_401(secured: Secured) -> None:
    client = registry_client(secured, "alice", "not-her-password")
    with pytest.raises(SchemaRegistryError) as err:
        client.get_subjects()
    assert err.value.http_status_code == 401
    assert err.value.error_code == 401


def test_registry_read_only_user_cannot_register_and_writer_cannot_change_compatibility(
    secured: Secured,
) -> None:
    bob = registry_client(secured, "bob", USERS["bob"])
    with pytest.raises(SchemaRegistryError) as err:
        bob.register_schema("orders-value", Schema(AVRO, "AVRO"))
    assert (err.value.http_status_code, err.value.error_code) == (403, 40301)
    alice = registry_client(secured, "alice", USERS["alice"])
    with pytest.raises(SchemaRegistryError) as err:
        alice.set_compatibility("orders-value", "NONE")
    assert (err.value.http_status_code, err.value.error_code) == (403, 40301)
    with pytest.raises(SchemaRegistryError) as err:  # outside her prefix
        alice.register_schema("payments-value", Schema(AVRO, "AVRO"))
    assert err.value.http_status_code == 403


def test_registry_accepts_a_static_bearer_token(secured: Secured) -> None:
    client = SchemaRegistryClient(
        {
            "url": secured.registry,
            "ssl.ca.location": str(secured.pki.ca),
            "bearer.auth.credentials.source": "STATIC_TOKEN",
            "bearer.auth.token": "static-token-of-bob",
            "bearer.auth.logical.cluster": "tidelake",
        }
    )
    assert isinstance(client.get_subjects(), list)
    with pytest.raises(SchemaRegistryError) as err:
        client.register_schema("orders-value", Schema(AVRO, "AVRO"))
    assert err.value.http_status_code == 403


def test_registry_accepts_a_token_the_catalog_issued(secured: Secured) -> None:
    form = {"grant_type": "client_credentials", "client_id": "etl", "client_secret": "etl-secret"}
    issued = httpx.post(f"{secured.http}/v1/oauth/tokens", data=form, verify=str(secured.pki.ca))
    token = issued.json()["access_token"]
    client = SchemaRegistryClient(
        {
            "url": secured.registry,
            "ssl.ca.location": str(secured.pki.ca),
            "bearer.auth.credentials.source": "STATIC_TOKEN",
            "bearer.auth.token": token,
            "bearer.auth.logical.cluster": "tidelake",
        }
    )
    assert isinstance(client.get_subjects(), list)  # etl's grant: read
    with pytest.raises(SchemaRegistryError) as err:
        client.register_schema("orders-value", Schema(AVRO, "AVRO"))
    assert err.value.http_status_code == 403
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    status = httpx.get(
        f"{secured.registry}/subjects",
        headers={"Authorization": f"Bearer {forged}"},
        verify=str(secured.pki.ca),
    ).status_code
    assert status == 401


def test_registry_speaks_https_only(secured: Secured) -> None:
    plain = f"http://127.0.0.1:{secured.proc.registry_port}/subjects"
    with pytest.raises(httpx.HTTPError):
        httpx.get(plain, timeout=5).raise_for_status()
    with pytest.raises(httpx.ConnectError):  # a client that does not trust the test CA
        httpx.get(f"{secured.registry}/subjects", timeout=5)


# -- Iceberg REST catalog ----------------------------------------------------


@pytest.fixture
def own_ca(monkeypatch: pytest.MonkeyPatch) -> None:
    """requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE win over a session's CA
    bundle (pyiceberg's ``ssl.cabundle``): without them the test CA is used."""
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)


def rest(s: Secured, client: str, secret: str) -> RestCatalog:
    props: dict[str, Any] = {
        "uri": s.http,
        "credential": f"{client}:{secret}",
        "oauth2-server-uri": f"{s.http}/v1/oauth/tokens",
        "ssl": {"cabundle": str(s.pki.ca)},
    }
    return RestCatalog(client, **props)


@pytest.mark.usefixtures("own_ca")
def test_catalog_oauth2_tokens_expire_and_pyiceberg_refreshes(secured: Secured) -> None:
    etl = rest(secured, "etl", "etl-secret")
    etl.create_namespace_if_not_exists("sales")
    schema = IcebergSchema(NestedField(1, "id", LongType(), required=False))
    etl.create_table_if_not_exists("sales.orders", schema)
    manager = etl._auth_manager
    assert manager is not None
    old = manager.auth_header()  # "Bearer <the token pyiceberg holds>"
    assert old is not None
    time.sleep(TOKEN_LIFETIME_S + 1.2)  # expiry is rounded up to a whole second
    expired = httpx.get(
        f"{secured.http}/v1/namespaces",
        headers={"Authorization": old},
        verify=str(secured.pki.ca),
    )
    assert expired.status_code == 401
    # the same client keeps working: it gets 401, fetches a new token, retries
    assert ("sales", "orders") in etl.list_tables("sales")
    assert manager.auth_header() != old


@pytest.mark.usefixtures("own_ca")
def test_catalog_namespace_grants(secured: Secured) -> None:
    etl = rest(secured, "etl", "etl-secret")
    etl.create_namespace_if_not_exists("sales")
    with pytest.raises(ForbiddenError):
        etl.create_namespace("hr")
    bi = rest(secured, "bi", "bi-secret")
    assert ("sales",) in bi.list_namespaces()
    with pytest.raises(ForbiddenError):
        bi.create_namespace("bi_scratch")
    with pytest.raises(Exception, match="401|invalid_client|Unknown client"):
        rest(secured, "etl", "wrong")


# -- admin API and web console -------------------------------------------------


def test_admin_api_needs_a_login_and_probes_stay_open(secured: Secured) -> None:
    ca = str(secured.pki.ca)
    anonymous = httpx.get(f"{secured.http}/api/v1/topics", verify=ca)
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Basic")
    assert httpx.get(f"{secured.http}/ui", verify=ca).status_code == 401
    wrong = httpx.get(f"{secured.http}/api/v1/topics", auth=("bob", "nope"), verify=ca)
    assert wrong.status_code == 401
    ok = httpx.get(f"{secured.http}/api/v1/topics", auth=("bob", USERS["bob"]), verify=ca)
    assert ok.status_code == 200
    assert httpx.get(f"{secured.http}/healthz", verify=ca).status_code == 200
    assert httpx.get(f"{secured.http}/metrics", verify=ca).status_code == 200


def test_console_in_chromium_with_the_browsers_basic_login(secured: Secured) -> None:
    admin = AdminClient({"bootstrap.servers": secured.proc.bootstrap})
    for future in admin.create_topics([NewTopic("secured-clicks", 1)]).values():
        future.result(30)

    def dump(url: str) -> str:
        return dump_dom(url, "--ignore-certificate-errors")

    port = secured.proc.http_port
    page = dump(f"https://bob:{USERS['bob']}@localhost:{port}/login")
    assert 'data-state="ready"' in page
    assert "secured-clicks" in page  # the page's own API calls were let in
    assert "secured-clicks" not in dump(f"https://localhost:{port}/ui/#/topics")
