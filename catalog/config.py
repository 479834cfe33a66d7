"""Settings for the platform's Iceberg catalog.

One :class:`CatalogSettings` describes which catalog the platform uses (the
embedded SQLite default, PostgreSQL, any Iceberg REST catalog, AWS Glue, a
Hive Metastore, AWS S3 Tables or Project Nessie) and how the built-in REST
catalog service guards itself.

S3 Tables and Nessie are reached through the Iceberg REST protocol they serve
(the installed pyiceberg has no S3 Tables catalog of its own):

- ``s3tables``: ``warehouse`` is the table bucket ARN
  (``arn:aws:s3tables:<region>:<account>:bucket/<name>``); requests go to
  ``https://s3tables.<region>.amazonaws.com/iceberg`` (or ``s3tables_endpoint``)
  signed with SigV4 for the ``s3tables`` service, with the AWS credentials of the
  environment (or ``s3tables_access_key_id`` / ``s3tables_secret_access_key``).
- ``nessie``: ``uri`` is the Nessie server (``http://host:19120``); the catalog is
  its Iceberg REST endpoint ``<uri>/iceberg/<nessie_branch>`` (the branch or tag
  is the path's reference), ``warehouse`` optionally names one of Nessie's
  configured warehouses.
Environment variables use the prefix ``TIDELAKE_CATALOG_`` (for example
``TIDELAKE_CATALOG_TYPE=glue``); nested maps are given as JSON.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["CatalogSettings", "CatalogType"]


class CatalogType(StrEnum):
    SQL = "sql"
    REST = "rest"
    GLUE = "glue"
    HIVE = "hive"
    S3TABLES = "s3tables"
    NESSIE = "nessie"


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

    # AWS S3 Tables (warehouse = the table bucket ARN); the region defaults to the ARN's.
    s3tables_region: str | None = None
    s3tables_endpoint: str | None = None
    s3tables_access_key_id: str | None = None
    s3tables_secret_access_key: str | None = None

    # Project Nessie: the branch (or tag) whose tables the catalog shows.
    nessie_branch: str = "main"

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
    # Per-namespace grants of those clients (catalog/rest/permissions.py), e.g.
    # {"etl": ["write:sales"], "bi": ["read"]}; empty: every client may do all.
    serve_oauth2_permissions: dict[str, list[str]] = Field(default_factory=dict)
    # Lifetime of tokens issued at /v1/oauth/tokens (claimed as expires_in and
    # enforced), and the HMAC secret that signs them. Without a secret each
    # process draws its own, so its tokens die with it; give several processes
    # serving one catalog the same secret to let them accept each other's tokens.
    serve_token_lifetime_seconds: int = Field(default=3600, ge=1)
    serve_token_secret: SecretStr | None = None

    @field_validator("serve_oauth2_permissions")
    @classmethod
    def _grants(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        from catalog.rest.permissions import NamespaceGrants

        NamespaceGrants(value)  # raises ValueError naming the bad grant
        return value

    @model_validator(mode="after")
    def _check_required(self) -> CatalogSettings:
        if self.type is CatalogType.REST and not self.uri:
            raise ValueError("TIDELAKE_CATALOG_URI is required when TIDELAKE_CATALOG_TYPE=rest")
        if self.type is CatalogType.HIVE and not (self.hive_uri or self.uri):
            raise ValueError(
                "TIDELAKE_CATALOG_HIVE_URI (or TIDELAKE_CATALOG_URI) is required when "
                "TIDELAKE_CATALOG_TYPE=hive"
            )
        if self.type is CatalogType.NESSIE and not self.uri:
            raise ValueError(
                "TIDELAKE_CATALOG_URI (the Nessie server, http://host:19120) is required when "
                "TIDELAKE_CATALOG_TYPE=nessie"
            )
        if self.type is CatalogType.S3TABLES:
            if not (self.warehouse or "").startswith("arn:aws:s3tables:"):
                raise ValueError(
                    "TIDELAKE_CATALOG_WAREHOUSE must be the table bucket ARN "
                    "(arn:aws:s3tables:<region>:<account>:bucket/<name>) when "
                    "TIDELAKE_CATALOG_TYPE=s3tables"
                )
        if self.credential is not None and ":" not in self.credential:
            raise ValueError("TIDELAKE_CATALOG_CREDENTIAL must look like 'client_id:client_secret'")
        return self

    def s3tables_signing_region(self) -> str:
        """The configured region, else the table bucket ARN's."""
        if self.s3tables_region:
            return self.s3tables_region
        parts = (self.warehouse or "").split(":")
        return parts[3] if len(parts) > 3 and parts[3] else "us-east-1"

    def default_warehouse(self) -> str:
        """The warehouse URL: the configured one or ``file://<data_dir>/warehouse``."""
        if self.warehouse:
            return self.warehouse
        return (self.data_dir.resolve() / "warehouse").as_uri()
