"""Settings for the platform's Iceberg catalog.

One :class:`CatalogSettings` describes which catalog the platform uses (the
embedded SQLite default, PostgreSQL, any Iceberg REST catalog, AWS Glue or a
Hive Metastore) and how the built-in REST catalog service guards itself.
Environment variables use the prefix ``TIDELAKE_CATALOG_`` (for example
``TIDELAKE_CATALOG_TYPE=glue``); nested maps are given as JSON.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["CatalogSettings", "CatalogType"]


class CatalogType(StrEnum):
    SQL = "sql"
    REST = "rest"
    GLUE = "glue"
    HIVE = "hive"


class CatalogSettings(BaseSettings):
    """Which Iceberg catalog the platform uses, and where its warehouse lives."""

    model_config = SettingsConfigDict(env_prefix="TIDELAKE_CATALOG_", extra="forbid")

    type: CatalogType = CatalogType.SQL
    name: str = "tidelake"
    data_dir: Path = Path("./tidelake-data")
    # sql: a SQLAlchemy URL (sqlite:///..., postgresql+psycopg2://...); rest: the
    # catalog's base URL; hive: thrift://host:port. Empty means the embedded default.
    uri: str | None = None
    # file:///..., s3://bucket/prefix, or a warehouse identifier for REST catalogs.
    warehouse: str | None = None

    # REST client authentication and routing.
    token: str | None = None
    credential: str | None = Field(
        default=None, description="OAuth2 client credentials 'id:secret'"
    )
    oauth2_server_uri: str | None = None
    scope: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)

    # Glue.
    glue_endpoint: str | None = None
    glue_region: str | None = None
    glue_catalog_id: str | None = None

    # Hive Metastore (thrift://host:port); ``uri`` works as well.
    hive_uri: str | None = None

    # S3 warehouse access (FileIO), passed to pyiceberg as s3.* properties.
    s3_endpoint: str | None = None
    s3_region: str | None = None
    s3_access_key_id: str | None = None
    s3_secret_access_key: str | None = None

    # Any further pyiceberg catalog properties, passed through unchanged.
    extra_properties: dict[str, str] = Field(default_factory=dict)

    # The built-in REST catalog service: accepted bearer tokens and OAuth2
    # clients (id -> secret) that may obtain one. Both empty: no authentication.
    serve_tokens: list[str] = Field(default_factory=list)
    serve_oauth2_clients: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_required(self) -> CatalogSettings:
        if self.type is CatalogType.REST and not self.uri:
            raise ValueError("TIDELAKE_CATALOG_URI is required when TIDELAKE_CATALOG_TYPE=rest")
        if self.type is CatalogType.HIVE and not (self.hive_uri or self.uri):
            raise ValueError(
                "TIDELAKE_CATALOG_HIVE_URI (or TIDELAKE_CATALOG_URI) is required when "
                "TIDELAKE_CATALOG_TYPE=hive"
            )
        if self.credential is not None and ":" not in self.credential:
            raise ValueError("TIDELAKE_CATALOG_CREDENTIAL must look like 'client_id:client_secret'")
        return self

    def default_warehouse(self) -> str:
        """The warehouse URL: the configured one or ``file://<data_dir>/warehouse``."""
        if self.warehouse:
            return self.warehouse
        return (self.data_dir.resolve() / "warehouse").as_uri()
