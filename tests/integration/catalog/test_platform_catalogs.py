"""One contract over every platform catalog the factory builds, each against a real server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.glue import GlueCatalog
from pyiceberg.catalog.hive import HiveCatalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.table.update import AssertRefSnapshotId, SetPropertiesUpdate
from pyiceberg.types import LongType

from catalog.app import create_app
from catalog.config import CatalogSettings
from catalog.factory import load_platform_catalog
from tests.integration.catalog.backends import (
    AWS_ENV,
    make_bucket,
    moto_server,
    postgres_available,
    postgres_database,
)
from tests.integration.catalog.conftest import serve
from tests.support import hive_metastore as hive_support

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]})


@pytest.fixture(scope="module")
def hive_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not hive_support.available():
        pytest.fail(
            "Hive Metastore needs java, javac and pyspark's jars: run scripts/dev.sh install"
        )
    with hive_support.hive_metastore(tmp_path_factory.mktemp("hms")) as uri:
        yield uri


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in AWS_ENV.items():
        monkeypatch.setenv(key, value)


def _sqlite(tmp_path: Path) -> Iterator[Catalog]:
    yield load_platform_catalog(CatalogSettings(data_dir=tmp_path))


def _postgres(tmp_path: Path) -> Iterator[Catalog]:
    if not postgres_available():
        pytest.fail("PostgreSQL is not running on 127.0.0.1:5432")
    with postgres_database() as url:
        catalog = load_platform_catalog(CatalogSettings(type="sql", uri=url, data_dir=tmp_path))
        assert isinstance(catalog, SqlCatalog)
        try:
            yield catalog
        finally:
            catalog.engine.dispose()


def _glue_s3(moto_url: str) -> Iterator[Catalog]:
    bucket = f"wh-{uuid.uuid4().hex[:8]}"
    make_bucket(moto_url, bucket)
    settings = CatalogSettings(
        type="glue",
        glue_endpoint=moto_url,
        glue_region="us-east-1",
        warehouse=f"s3://{bucket}/warehouse",
        s3_endpoint=moto_url,
        s3_region="us-east-1",
        s3_access_key_id="testing",
        s3_secret_access_key="testing",
        extra_properties={
            "glue.access-key-id": "testing",
            "glue.secret-access-key": "testing",
            # pyarrow 26's S3 multipart completion trips over moto; fsspec's s3fs does not.
            "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",
        },
    )
    catalog = load_platform_catalog(settings)
    assert isinstance(catalog, GlueCatalog)
    yield catalog


def _sqlite_s3(moto_url: str, tmp_path: Path) -> Iterator[Catalog]:
    bucket = f"wh-{uuid.uuid4().hex[:8]}"
    make_bucket(moto_url, bucket)
    settings = CatalogSettings(
        data_dir=tmp_path,
        warehouse=f"s3://{bucket}/warehouse",
        s3_endpoint=moto_url,
        s3_region="us-east-1",
        s3_access_key_id="testing",
        s3_secret_access_key="testing",
        extra_properties={"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"},
    )
    catalog = load_platform_catalog(settings)
    assert isinstance(catalog, SqlCatalog)
    yield catalog


def _rest(tmp_path: Path) -> Iterator[Catalog]:
    server_settings = CatalogSettings(data_dir=tmp_path, serve_tokens=["s3cret"])
    with serve(create_app(server_settings)) as url:
        catalog = load_platform_catalog(
            CatalogSettings(type="rest", uri=url, token="s3cret", headers={"X-Client": "tests"})
        )
        assert isinstance(catalog, RestCatalog)
        yield catalog


def _hive(uri: str, tmp_path: Path) -> Iterator[Catalog]:
    settings = CatalogSettings(type="hive", hive_uri=uri, data_dir=tmp_path)
    catalog = load_platform_catalog(settings)
    assert isinstance(catalog, HiveCatalog)
    yield catalog


@pytest.fixture(params=["sqlite", "sqlite-s3", "postgres", "glue-s3", "rest", "hive"])
def platform_catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Catalog]:
    kind = request.param
    if kind == "sqlite":
        yield from _sqlite(tmp_path)
    elif kind == "sqlite-s3":
        request.getfixturevalue("aws_env")
        yield from _sqlite_s3(request.getfixturevalue("moto_url"), tmp_path)
    elif kind == "postgres":
        yield from _postgres(tmp_path)
    elif kind == "glue-s3":
        request.getfixturevalue("aws_env")
        yield from _glue_s3(request.getfixturevalue("moto_url"))
    elif kind == "hive":
        yield from _hive(request.getfixturevalue("hive_uri"), tmp_path)
    else:
        yield from _rest(tmp_path)


def test_catalog_contract(platform_catalog: Catalog) -> None:
    cat = platform_catalog
    ns = f"ns_{uuid.uuid4().hex[:8]}"
    cat.create_namespace(ns, {"owner": "ops"})
    assert (ns,) in cat.list_namespaces()
    table = cat.create_table((ns, "events"), ROWS.schema)
    table.append(ROWS)
    assert cat.load_table((ns, "events")).scan().to_arrow().num_rows == 3
    with pytest.raises(TableAlreadyExistsError):
        cat.create_table((ns, "events"), ROWS.schema)

    # Optimistic concurrency: a commit against a stale snapshot fails and changes nothing.
    stale = cat.load_table((ns, "events"))
    cat.load_table((ns, "events")).append(ROWS)
    requirement = AssertRefSnapshotId(ref="main", snapshot_id=stale.metadata.current_snapshot_id)
    with pytest.raises(CommitFailedException):
        cat.commit_table(stale, (requirement,), (SetPropertiesUpdate(updates={"x": "1"}),))
    fresh = cat.load_table((ns, "events"))
    assert "x" not in fresh.properties and fresh.scan().to_arrow().num_rows == 6

    with fresh.update_schema() as update:
        update.add_column("extra", LongType())
    assert cat.load_table((ns, "events")).schema().find_field("extra").field_id == 3

    cat.rename_table((ns, "events"), (ns, "renamed"))
    assert cat.list_tables(ns) == [(ns, "renamed")]
    cat.drop_table((ns, "renamed"))
    with pytest.raises(NoSuchTableError):
        cat.load_table((ns, "renamed"))
    cat.drop_namespace(ns)
    with pytest.raises(NoSuchNamespaceError):
        cat.load_namespace_properties(ns)


def test_rest_service_over_postgres(tmp_path: Path) -> None:
    if not postgres_available():
        pytest.fail("PostgreSQL is not running on 127.0.0.1:5432")
    with postgres_database() as url:
        backing = load_platform_catalog(CatalogSettings(type="sql", uri=url, data_dir=tmp_path))
        with serve(create_app(catalog=backing)) as base:
            client = RestCatalog("c", uri=base)
            client.create_namespace("pg")
            client.create_table(("pg", "t"), ROWS.schema).append(ROWS)
            assert client.load_table(("pg", "t")).scan().to_arrow().num_rows == 3
            assert (
                backing.load_table(("pg", "t")).metadata_location
                == client.load_table(("pg", "t")).metadata_location
            )
        assert isinstance(backing, SqlCatalog)
        backing.engine.dispose()


def test_rest_service_over_glue_with_s3_warehouse(moto_url: str, aws_env: None) -> None:
    backing = next(_glue_s3(moto_url))
    with serve(create_app(catalog=backing)) as base:
        client = RestCatalog("c", uri=base)
        ns = f"g_{uuid.uuid4().hex[:6]}"
        client.create_namespace(ns)
        table = client.create_table((ns, "t"), ROWS.schema)
        assert table.location().startswith("s3://")
        table.append(ROWS)  # the client writes to S3 with the FileIO config the server hands out
        assert client.load_table((ns, "t")).scan().to_arrow().num_rows == 3
        stale = client.load_table((ns, "t"))
        client.load_table((ns, "t")).append(ROWS)
        with pytest.raises(CommitFailedException):
            client.commit_table(
                stale,
                (AssertRefSnapshotId(ref="main", snapshot_id=stale.metadata.current_snapshot_id),),
                (SetPropertiesUpdate(updates={"x": "1"}),),
            )


def test_multi_table_transaction_over_glue_is_refused(moto_url: str, aws_env: None) -> None:
    import httpx

    backing = next(_glue_s3(moto_url))
    with serve(create_app(catalog=backing)) as base:
        client = RestCatalog("c", uri=base)
        ns = f"tx_{uuid.uuid4().hex[:6]}"
        client.create_namespace(ns)
        uuids = {
            n: str(client.create_table((ns, n), ROWS.schema).metadata.table_uuid)
            for n in ("a", "b")
        }

        def change(name: str, uuid_: str) -> dict[str, object]:
            return {
                "identifier": {"namespace": [ns], "name": name},
                "requirements": [{"type": "assert-table-uuid", "uuid": uuid_}],
                "updates": [{"action": "set-properties", "updates": {"tx": "1"}}],
            }

        # Glue cannot move two tables in one step: multi-table commits are refused
        # (406) rather than made table by table, and not advertised.
        ok = {"table-changes": [change("a", uuids["a"]), change("b", uuids["b"])]}
        refused = httpx.post(f"{base}/v1/transactions/commit", json=ok)
        assert refused.status_code == 406, refused.text
        assert refused.json()["error"]["type"] == "UnsupportedOperationException"
        assert "tx" not in backing.load_table((ns, "a")).properties
        assert "tx" not in backing.load_table((ns, "b")).properties
        endpoints = httpx.get(f"{base}/v1/config").json()["endpoints"]
        assert "POST /v1/{prefix}/transactions/commit" not in endpoints
        one = {"table-changes": [change("a", uuids["a"])]}
        assert httpx.post(f"{base}/v1/transactions/commit", json=one).status_code == 204
        assert backing.load_table((ns, "a")).properties["tx"] == "1"


def test_rest_client_with_oauth2_client_credentials(tmp_path: Path) -> None:
    settings = CatalogSettings(data_dir=tmp_path, serve_oauth2_clients={"app": "pw"})
    with serve(create_app(settings)) as url:
        token_url = f"{url}/v1/oauth/tokens"
        good = load_platform_catalog(
            CatalogSettings(type="rest", uri=url, credential="app:pw", oauth2_server_uri=token_url)
        )
        good.create_namespace("secured")
        assert ("secured",) in good.list_namespaces()
        from pyiceberg.exceptions import OAuthError, UnauthorizedError

        with pytest.raises(OAuthError):
            load_platform_catalog(
                CatalogSettings(
                    type="rest", uri=url, credential="app:wrong", oauth2_server_uri=token_url
                )
            )
        with pytest.raises(UnauthorizedError):
            load_platform_catalog(CatalogSettings(type="rest", uri=url))


def test_rest_service_over_hive_metastore(hive_uri: str, tmp_path: Path) -> None:
    backing = next(_hive(hive_uri, tmp_path))
    with serve(create_app(catalog=backing)) as base:
        client = RestCatalog("c", uri=base)
        ns = f"h_{uuid.uuid4().hex[:6]}"
        client.create_namespace(ns)
        client.create_table((ns, "t"), ROWS.schema).append(ROWS)
        assert client.load_table((ns, "t")).scan().to_arrow().num_rows == 3
        assert (
            backing.load_table((ns, "t")).metadata_location
            == client.load_table((ns, "t")).metadata_location
        )
        txn = client.create_table_transaction((ns, "staged"), ROWS.schema)
        txn.append(ROWS)
        txn.commit_transaction()
        assert backing.load_table((ns, "staged")).scan().to_arrow().num_rows == 3
