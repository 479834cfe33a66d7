"""A broker of a cluster (a PostgreSQL metadata_url) shares the schema registry
and the catalog with the other brokers by default; a value the user set, in the
file, the environment or a flag, still wins."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from api.cluster import shared_services
from api.settings import load_settings
from catalog.config import CatalogType
from catalog.factory import catalog_properties
from ingest.errors import ConfigError

PG = "postgresql://tl:secret@db.internal:5432/tidelake"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("TIDELAKE_"):
            monkeypatch.delenv(name)


@pytest.fixture
def clustered(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TIDELAKE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TIDELAKE_METADATA_URL", PG)
    monkeypatch.setenv("TIDELAKE_OBJECT_STORE_URL", "s3://bucket/lake/")
    monkeypatch.setenv("TIDELAKE_S3_ENDPOINT_URL", "http://s3.internal:9000")
    monkeypatch.setenv("TIDELAKE_S3_REGION", "eu-west-1")
    monkeypatch.setenv("TIDELAKE_S3_ACCESS_KEY_ID", "AK")
    monkeypatch.setenv("TIDELAKE_S3_SECRET_ACCESS_KEY", "SK")


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tidelake.toml"
    path.write_text(text)
    return path


@pytest.mark.usefixtures("clustered")
def test_a_clustered_broker_defaults_to_the_shared_registry_and_catalog() -> None:
    s = load_settings()
    assert s.registry.store_url == f"{PG}?schema=tidelake_registry"
    assert s.catalog.type is CatalogType.SQL
    assert s.catalog.uri == "postgresql+psycopg2://tl:secret@db.internal:5432/tidelake"
    props = catalog_properties(s.catalog)
    assert props["warehouse"] == "s3://bucket/lake/warehouse"
    assert props["s3.endpoint"] == "http://s3.internal:9000"
    assert props["s3.region"] == "eu-west-1"
    assert props["s3.access-key-id"] == "AK"
    assert props["s3.secret-access-key"] == "SK"
    described = shared_services(s)
    assert "secret" not in described
    assert "tidelake_registry" in described and "s3://bucket/lake/warehouse" in described


def test_a_metadata_schema_puts_the_registry_and_catalog_beside_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIDELAKE_METADATA_URL", f"{PG}?schema=prod&sslmode=require")
    monkeypatch.setenv("TIDELAKE_OBJECT_STORE_URL", "file:///srv/lake")
    s = load_settings()
    assert s.registry.store_url == f"{PG}?sslmode=require&schema=prod_registry"
    assert s.catalog.uri == (
        "postgresql+psycopg2://tl:secret@db.internal:5432/tidelake"
        "?sslmode=require&options=-csearch_path%3Dprod"
    )
    assert s.catalog.warehouse == "file:///srv/lake/warehouse"
    assert s.catalog.s3_endpoint is None


@pytest.mark.usefixtures("clustered")
def test_what_the_user_set_wins_over_the_cluster_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = _toml(
        tmp_path,
        '[registry]\nstore_url = "memory://"\n[catalog]\nwarehouse = "s3://other/wh"\n',
    )
    monkeypatch.setenv("TIDELAKE_CATALOG_URI", "postgresql+psycopg2://me@elsewhere/cat")
    s = load_settings(path, overrides={"catalog.s3_region": "us-east-2"})
    assert s.registry.store_url == "memory://"
    assert s.catalog.uri == "postgresql+psycopg2://me@elsewhere/cat"
    assert s.catalog.warehouse == "s3://other/wh"
    assert s.catalog.s3_region == "us-east-2"
    assert s.catalog.s3_endpoint == "http://s3.internal:9000"  # not set: shared default

    monkeypatch.setenv("TIDELAKE_REGISTRY_STORE_URL", "sqlite:////tmp/mine.db")
    assert load_settings().registry.store_url == "sqlite:////tmp/mine.db"


@pytest.mark.usefixtures("clustered")
def test_a_non_sql_catalog_takes_none_of_the_sql_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIDELAKE_CATALOG_TYPE", "rest")
    monkeypatch.setenv("TIDELAKE_CATALOG_URI", "http://polaris:8181/api/catalog")
    s = load_settings()
    assert s.catalog.type is CatalogType.REST
    assert s.catalog.uri == "http://polaris:8181/api/catalog"
    assert s.catalog.warehouse is None
    assert s.catalog.s3_endpoint is None
    # a REST catalog still needs its own uri: the cluster's database is no default
    monkeypatch.delenv("TIDELAKE_CATALOG_URI")
    with pytest.raises(ConfigError, match="catalog.uri"):
        load_settings()


def test_a_single_broker_keeps_its_local_defaults(tmp_path: Path) -> None:
    s = load_settings(data_dir=str(tmp_path))
    assert s.registry.store_url == f"sqlite:///{(tmp_path / 'schema-registry.db').resolve()}"
    assert s.catalog.uri is None
    assert s.catalog.warehouse is None
