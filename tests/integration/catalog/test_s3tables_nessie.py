"""``type = "s3tables"`` and ``type = "nessie"``: the REST catalog each serves,
reached with the URI layout, signing and branch the settings give. Tidelake's own
REST catalog stands in for both servers (moto does not serve S3 Tables' Iceberg
REST endpoint, and no Nessie server runs here): mounted at Nessie's
``/iceberg/<branch>`` paths, and at S3 Tables' ``/iceberg`` with the table bucket
ARN as its warehouse."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from fastapi import FastAPI, Request
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog

from api.cli import main as cli_main
from catalog.app import create_app
from catalog.config import CatalogSettings
from catalog.factory import load_platform_catalog
from catalog.rest.router import create_rest_router
from table_topic.commit import TableWriter, committed_offsets
from tests.integration.catalog.conftest import serve
from tests.unit.table_topic.test_commit import cfg, rows

ARN = "arn:aws:s3tables:eu-west-1:123456789012:bucket/lake"


def _sql(tmp: Path, name: str) -> SqlCatalog:
    (tmp / name).mkdir(parents=True, exist_ok=True)
    return SqlCatalog(
        name, uri=f"sqlite:///{tmp}/{name}/c.db", warehouse=(tmp / name / "wh").as_uri()
    )


@pytest.fixture
def nessie(tmp_path: Path) -> Iterator[tuple[str, SqlCatalog, SqlCatalog]]:
    """A stand-in Nessie server with branches main and dev."""
    main, dev = _sql(tmp_path, "main"), _sql(tmp_path, "dev")
    app = FastAPI()
    app.mount("/iceberg/main", create_app(catalog=main))
    app.mount("/iceberg/dev", create_app(catalog=dev))
    with serve(app) as url:
        yield url, main, dev


def test_nessie_catalog_works_on_the_configured_branch_for_table_topics(
    nessie: tuple[str, SqlCatalog, SqlCatalog],
) -> None:
    url, main, dev = nessie
    settings = CatalogSettings(type="nessie", uri=url, nessie_branch="dev")
    catalog = load_platform_catalog(settings)
    assert isinstance(catalog, RestCatalog)
    assert catalog.properties["uri"] == f"{url}/iceberg/dev"
    # a table topic's commit protocol through it: rows and offsets land on dev only
    writer = TableWriter(catalog, cfg(), 1 << 20)
    writer.offsets()
    writer.commit([rows([0, 1], {"id": pa.array([1, 2], pa.int64())})], {0: 2})
    assert committed_offsets(dev.load_table(("default", "t"))) == {0: 2}
    assert dev.load_table(("default", "t")).scan().to_arrow().num_rows == 2
    assert not main.table_exists(("default", "t"))


def test_nessie_requires_the_server_uri() -> None:
    with pytest.raises(ValueError, match="TIDELAKE_CATALOG_URI"):
        CatalogSettings(type="nessie")


def test_maintenance_sync_mirrors_tables_into_a_nessie_branch(
    nessie: tuple[str, SqlCatalog, SqlCatalog], tmp_path: Path
) -> None:
    url, main, _dev = nessie
    data = tmp_path / "platform"
    source = load_platform_catalog(CatalogSettings(data_dir=data))
    source.create_namespace("shop")
    table = source.create_table(("shop", "orders"), schema=pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    config = tmp_path / "sync.toml"
    config.write_text(
        f'[[sync.targets]]\nname = "nessie"\ntype = "nessie"\nuri = "{url}"\n'
        'nessie_branch = "main"\n'
    )
    code = cli_main(
        ["maintenance", "sync", "--data-dir", str(data), "--maintenance-config", str(config)]
    )
    assert code == 0
    mirrored = main.load_table(("shop", "orders"))
    assert mirrored.scan().to_arrow().num_rows == 3


def test_s3tables_catalog_signs_requests_for_the_s3tables_service(tmp_path: Path) -> None:
    backend = _sql(tmp_path, "s3t")
    seen: list[str] = []
    rest = FastAPI()
    rest.include_router(create_rest_router(lambda: backend, warehouse=ARN))
    app = FastAPI()

    @app.middleware("http")
    async def record(request: Request, call_next):  # type: ignore[no-untyped-def]
        seen.append(request.headers.get("authorization", ""))
        return await call_next(request)

    app.mount("/iceberg", rest)
    with serve(app) as url:
        settings = CatalogSettings(
            type="s3tables",
            warehouse=ARN,
            s3tables_endpoint=f"{url}/iceberg",
            s3tables_access_key_id="AKIDEXAMPLE",
            s3tables_secret_access_key="secret",
        )
        catalog = load_platform_catalog(settings)
        assert isinstance(catalog, RestCatalog)
        catalog.create_namespace("lake")
        writer = TableWriter(catalog, cfg(**{"table.topic.namespace": "lake"}), 1 << 20)
        writer.offsets()
        writer.commit([rows([0], {"id": pa.array([7], pa.int64())})], {0: 1})
    assert committed_offsets(backend.load_table(("lake", "t"))) == {0: 1}
    assert seen and all(
        h.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        and "/eu-west-1/s3tables/aws4_request" in h
        for h in seen
    ), seen[:3]


def test_s3tables_needs_a_table_bucket_arn_and_defaults_to_aws() -> None:
    with pytest.raises(ValueError, match="table bucket ARN"):
        CatalogSettings(type="s3tables", warehouse="s3://bucket/x")
    from catalog.factory import catalog_properties

    props = catalog_properties(CatalogSettings(type="s3tables", warehouse=ARN))
    assert props["uri"] == "https://s3tables.eu-west-1.amazonaws.com/iceberg"
    assert props["rest.signing-name"] == "s3tables" and props["rest.sigv4-enabled"] == "true"


def test_spark_jobs_reach_s3tables_and_nessie_as_rest_catalogs() -> None:
    from spark.session import spark_catalog_conf

    conf = spark_catalog_conf(CatalogSettings(type="s3tables", warehouse=ARN))
    short = {
        k.rsplit(".", 1)[-1] if "rest." not in k else k.split(".", 4)[-1]: v
        for k, v in conf.items()
    }
    assert short["type"] == "rest" and short["warehouse"] == ARN
    assert short["rest.signing-name"] == "s3tables" and short["rest.sigv4-enabled"] == "true"
    conf = spark_catalog_conf(
        CatalogSettings(type="nessie", uri="http://n:19120", nessie_branch="b")
    )
    assert "http://n:19120/iceberg/b" in conf.values()
