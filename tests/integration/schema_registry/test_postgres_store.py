"""PostgreSQL store: the shared contract, plus cross-process id allocation and dedup.

Each test creates its own PostgreSQL schema (namespace) and drops it afterwards."""

from __future__ import annotations

import json
import multiprocessing
import uuid
from collections.abc import Iterator

import pytest

from schema_registry.store import SchemaStore, open_store
from tests.unit.schema_registry.test_store_contract import StoreContract

DSN = "postgresql://postgres@127.0.0.1:5432/test"


def _admin() -> object:
    import psycopg2

    try:
        conn = psycopg2.connect(DSN, connect_timeout=3)
    except psycopg2.OperationalError as exc:  # pragma: no cover - no server here
        pytest.fail(f"PostgreSQL not reachable on 127.0.0.1:5432: {exc}")
    conn.autocommit = True
    return conn


@pytest.fixture
def pg_schema() -> Iterator[str]:
    conn = _admin()
    name = f"sr_test_{uuid.uuid4().hex[:10]}"
    with conn.cursor() as cur:  # type: ignore[attr-defined]
        cur.execute(f"CREATE SCHEMA {name}")
    try:
        yield name
    finally:
        with conn.cursor() as cur:  # type: ignore[attr-defined]
            cur.execute(f"DROP SCHEMA {name} CASCADE")
        conn.close()  # type: ignore[attr-defined]


class TestPostgresStore(StoreContract):
    @pytest.fixture
    def store(self, pg_schema: str) -> Iterator[SchemaStore]:
        with open_store(f"{DSN}?schema={pg_schema}") as s:
            yield s


def _register_many(url: str, worker: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    from schema_registry.service import RegistryService, SchemaRequest

    store = open_store(url)
    service = RegistryService(store)
    results = []
    for i in range(15):
        shared = json.dumps(
            {"type": "record", "name": "Shared", "fields": [{"name": "a", "type": "int"}]}
        )
        own = json.dumps({"type": "record", "name": f"W{worker}x{i}", "fields": []})
        results.append(("shared", service.register("shared", SchemaRequest(shared, "AVRO"))["id"]))
        results.append(
            (
                f"own-{worker}",
                service.register(f"own-{worker}-{i}", SchemaRequest(own, "AVRO"))["id"],
            )
        )
    store.close()
    out.put(results)


def test_processes_sharing_postgres_agree_on_ids(pg_schema: str) -> None:
    url = f"{DSN}?schema={pg_schema}"
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_register_many, args=(url, w, queue)) for w in range(3)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    shared_ids = {sid for r in results for kind, sid in r if kind == "shared"}
    assert len(shared_ids) == 1, "the same schema got one id in every process"
    own_ids = [sid for r in results for kind, sid in r if kind != "shared"]
    assert len(own_ids) == len(set(own_ids)) == 45, "distinct schemas never share an id"
    with open_store(url) as store, store.read() as tx:
        assert [v.version for v in tx.versions("shared")] == [1]


def test_two_registries_on_one_postgres_share_subjects_ids_and_config(pg_schema: str) -> None:
    import httpx

    from schema_registry.app import RegistrySettings
    from tests.integration.schema_registry.conftest import RunningRegistry

    settings = RegistrySettings(store_url=f"{DSN}?schema={pg_schema}")
    schema = json.dumps(
        {"type": "record", "name": "Shared", "fields": [{"name": "a", "type": "int"}]}
    )
    with RunningRegistry(settings) as a, RunningRegistry(settings) as b:
        first = httpx.post(
            f"{a.url}/subjects/orders-value/versions", json={"schema": schema}
        ).json()
        assert httpx.get(f"{b.url}/schemas/ids/{first['id']}").status_code == 200
        again = httpx.post(
            f"{b.url}/subjects/orders-value/versions", json={"schema": schema}
        ).json()
        assert again == first
        httpx.put(f"{b.url}/config/orders-value", json={"compatibility": "NONE"})
        assert httpx.get(f"{a.url}/config/orders-value").json() == {"compatibilityLevel": "NONE"}


def test_a_dropped_connection_is_a_store_error_and_the_store_recovers(pg_schema: str) -> None:
    from schema_registry.errors import StoreError

    store = open_store(f"{DSN}?schema={pg_schema}")
    try:
        with store.read() as tx:
            pid = tx._one("SELECT pg_backend_pid()")[0]  # type: ignore[attr-defined]
        admin = _admin()
        with admin.cursor() as cur:  # type: ignore[attr-defined]
            cur.execute("SELECT pg_terminate_backend(%s)", (pid,))
        admin.close()  # type: ignore[attr-defined]
        with pytest.raises(StoreError), store.read() as tx:
            tx.subjects()
        with store.read() as tx:
            assert tx.subjects() == []
    finally:
        store.close()


def test_nul_in_a_subject_is_not_found_or_invalid_never_500(pg_schema: str) -> None:
    """PostgreSQL text cannot hold NUL: such a subject cannot exist, so reads find nothing and
    writes are refused as invalid (42208), as on every other store (fuzzing found the 500s)."""
    from fastapi.testclient import TestClient

    from schema_registry.app import RegistrySettings, create_app

    store = open_store(f"{DSN}?schema={pg_schema}")
    app = create_app(RegistrySettings(store_url="memory://"), store=store)
    avro = json.dumps({"type": "record", "name": "A", "doc": "nul \u0000", "fields": []})
    expected = [
        ("get", "/subjects/a%00b/versions", None, 404, 40401),
        ("get", "/subjects/a%00b/versions/1", None, 404, 40401),
        ("get", "/subjects/a%00b/metadata?key=%00&value=x", None, 404, 40401),
        ("post", "/subjects/a%00b", {"schema": '"int"'}, 404, 40401),
        ("post", "/subjects/a%00b/versions", {"schema": '"int"'}, 422, 42208),
        ("post", "/compatibility/subjects/a%00b/versions/1", {"schema": '"int"'}, 404, 40401),
        ("delete", "/subjects/a%00b", None, 404, 40401),
        ("get", "/config/a%00b", None, 404, 40408),
        ("put", "/config/a%00b", {"compatibility": "NONE"}, 422, 42208),
        ("delete", "/config/a%00b", None, 404, 40401),
        ("get", "/mode/a%00b", None, 404, 40409),
        ("put", "/mode/a%00b", {"mode": "READONLY"}, 422, 42208),
        ("delete", "/mode/a%00b", None, 404, 40409),
        ("post", "/subjects/nul-doc/versions", {"schema": avro}, 200, None),
    ]
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            for method, url, body, status, code in expected:
                r = client.request(method, url, json=body)
                assert r.status_code == status, (method, url, r.text)
                if code is not None:
                    assert r.json()["error_code"] == code, (method, url, r.text)
            assert client.get("/subjects").json() == ["nul-doc"]
            assert json.loads(client.get("/subjects/nul-doc/versions/1/schema").text) == (
                json.loads(avro)
            )
    finally:
        store.close()
