"""Settings validation and the properties the factory hands to pyiceberg."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from pyiceberg.catalog.sql import SqlCatalog

from catalog.config import CatalogSettings, CatalogType
from catalog.factory import catalog_properties, load_platform_catalog


def test_embedded_default_is_sqlite_under_the_data_dir(tmp_path: Path) -> None:
    settings = CatalogSettings(data_dir=tmp_path)
    props = catalog_properties(settings)
    assert props["uri"] == f"sqlite:///{tmp_path.resolve()}/catalog.db"
    assert props["warehouse"] == (tmp_path.resolve() / "warehouse").as_uri()
    catalog = load_platform_catalog(settings)
    assert isinstance(catalog, SqlCatalog)
    assert (tmp_path / "catalog.db").exists() and (tmp_path / "warehouse").is_dir()


def test_settings_come_from_tidelake_catalog_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDELAKE_CATALOG_TYPE", "rest")
    monkeypatch.setenv("TIDELAKE_CATALOG_URI", "http://cat:8181")
    monkeypatch.setenv("TIDELAKE_CATALOG_HEADERS", '{"X-Tenant": "a"}')
    monkeypatch.setenv("TIDELAKE_CATALOG_CREDENTIAL", "id:secret")
    settings = CatalogSettings()
    assert settings.type is CatalogType.REST
    props = catalog_properties(settings)
    assert props == {
        "uri": "http://cat:8181",
        "credential": "id:secret",
        "header.X-Tenant": "a",
    }


def test_rest_without_uri_names_the_key() -> None:
    with pytest.raises(ValidationError, match="TIDELAKE_CATALOG_URI"):
        CatalogSettings(type="rest")


def test_hive_without_uri_names_the_key() -> None:
    with pytest.raises(ValidationError, match="TIDELAKE_CATALOG_HIVE_URI"):
        CatalogSettings(type="hive")


def test_malformed_credential_is_rejected() -> None:
    with pytest.raises(ValidationError, match="TIDELAKE_CATALOG_CREDENTIAL"):
        CatalogSettings(type="rest", uri="http://x", credential="no-colon")


def test_unknown_type_and_unknown_keys_are_rejected() -> None:
    with pytest.raises(ValidationError):
        CatalogSettings(type="nessie")
    with pytest.raises(ValidationError):
        CatalogSettings(colour="blue")  # type: ignore[call-arg]


def test_glue_properties_with_endpoint_override_and_s3_warehouse() -> None:
    settings = CatalogSettings(
        type="glue",
        glue_endpoint="http://127.0.0.1:5000",
        glue_region="eu-west-1",
        warehouse="s3://bucket/wh",
        s3_endpoint="http://127.0.0.1:5000",
        extra_properties={"glue.skip-archive": "false"},
    )
    assert catalog_properties(settings) == {
        "glue.endpoint": "http://127.0.0.1:5000",
        "glue.region": "eu-west-1",
        "warehouse": "s3://bucket/wh",
        "s3.endpoint": "http://127.0.0.1:5000",
        "glue.skip-archive": "false",
    }


def test_hive_and_rest_token_properties(tmp_path: Path) -> None:
    hive = CatalogSettings(type="hive", hive_uri="thrift://127.0.0.1:9083", data_dir=tmp_path)
    assert catalog_properties(hive)["uri"] == "thrift://127.0.0.1:9083"
    rest = CatalogSettings(
        type="rest",
        uri="http://x",
        token="t",
        warehouse="prod",
        oauth2_server_uri="http://auth/token",
        scope="catalog",
    )
    assert catalog_properties(rest) == {
        "uri": "http://x",
        "warehouse": "prod",
        "token": "t",
        "oauth2-server-uri": "http://auth/token",
        "scope": "catalog",
    }
