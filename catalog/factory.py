"""Build the platform's Iceberg catalog from :class:`CatalogSettings`.

pyiceberg's :class:`~pyiceberg.catalog.Catalog` is the interface; this module
only turns settings into the properties each pyiceberg catalog expects.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from pyiceberg.catalog import Catalog

from catalog.config import CatalogSettings, CatalogType

__all__ = ["catalog_properties", "load_platform_catalog", "nessie_rest_uri"]


def _file_io_properties(settings: CatalogSettings) -> dict[str, str]:
    props: dict[str, str] = {}
    for key, value in (
        ("s3.endpoint", settings.s3_endpoint),
        ("s3.region", settings.s3_region),
        ("s3.access-key-id", settings.s3_access_key_id),
        ("s3.secret-access-key", settings.s3_secret_access_key),
    ):
        if value:
            props[key] = value
    return props


def catalog_properties(settings: CatalogSettings) -> dict[str, str]:
    """The pyiceberg catalog properties the settings stand for."""
    props = _file_io_properties(settings)
    kind = settings.type
    if kind is CatalogType.SQL:
        if settings.uri:
            props["uri"] = settings.uri
        else:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
            props["uri"] = f"sqlite:///{(settings.data_dir.resolve() / 'catalog.db').as_posix()}"
        props["warehouse"] = settings.default_warehouse()
        _ensure_local_warehouse(props["warehouse"])
    elif kind is CatalogType.REST:
        assert settings.uri is not None  # checked by the settings validator
        props["uri"] = settings.uri
        if settings.warehouse:
            props["warehouse"] = settings.warehouse
        if settings.token:
            props["token"] = settings.token
        if settings.credential:
            props["credential"] = settings.credential
        if settings.oauth2_server_uri:
            props["oauth2-server-uri"] = settings.oauth2_server_uri
        if settings.scope:
            props["scope"] = settings.scope
        for header, value in settings.headers.items():
            props[f"header.{header}"] = value
    elif kind is CatalogType.S3TABLES:
        region = settings.s3tables_signing_region()
        assert settings.warehouse is not None  # checked by the settings validator
        props["uri"] = (
            settings.s3tables_endpoint or f"https://s3tables.{region}.amazonaws.com/iceberg"
        )
        props["warehouse"] = settings.warehouse
        props["rest.sigv4-enabled"] = "true"
        props["rest.signing-name"] = "s3tables"
        props["rest.signing-region"] = region
        if settings.s3tables_access_key_id:
            props["client.access-key-id"] = settings.s3tables_access_key_id
        if settings.s3tables_secret_access_key:
            props["client.secret-access-key"] = settings.s3tables_secret_access_key
        props.setdefault("client.region", region)
    elif kind is CatalogType.NESSIE:
        assert settings.uri is not None  # checked by the settings validator
        props["uri"] = nessie_rest_uri(settings.uri, settings.nessie_branch)
        if settings.warehouse:
            props["warehouse"] = settings.warehouse
        if settings.token:
            props["token"] = settings.token
        for header, value in settings.headers.items():
            props[f"header.{header}"] = value
    elif kind is CatalogType.GLUE:
        props["warehouse"] = settings.default_warehouse()
        if settings.glue_endpoint:
            props["glue.endpoint"] = settings.glue_endpoint
        if settings.glue_region:
            props["glue.region"] = settings.glue_region
        if settings.glue_catalog_id:
            props["glue.id"] = settings.glue_catalog_id
    elif kind is CatalogType.HIVE:
        uri = settings.hive_uri or settings.uri
        assert uri is not None  # checked by the settings validator
        props["uri"] = uri
        props["warehouse"] = settings.default_warehouse()
    props.update(settings.extra_properties)
    return props


def nessie_rest_uri(server: str, branch: str) -> str:
    """Nessie's Iceberg REST endpoint for ``branch``: ``<server>/iceberg/<branch>``
    (a URI that already ends in ``/iceberg`` gets the branch appended)."""
    base = server.rstrip("/")
    if not base.endswith("/iceberg"):
        base += "/iceberg"
    return f"{base}/{branch}"


def _ensure_local_warehouse(warehouse: str) -> None:
    if warehouse.startswith("file://"):
        Path(unquote(urlparse(warehouse).path)).mkdir(parents=True, exist_ok=True)


def load_platform_catalog(settings: CatalogSettings) -> Catalog:
    """Open the catalog the settings name. Raises pyiceberg's errors when it cannot."""
    props = catalog_properties(settings)
    kind = settings.type
    # Imported per type: Glue pulls in boto3, Hive the thrift client.
    if kind is CatalogType.SQL:
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog(settings.name, **props)
    if kind in (CatalogType.REST, CatalogType.S3TABLES, CatalogType.NESSIE):
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog(settings.name, **props)
    if kind is CatalogType.GLUE:
        from pyiceberg.catalog.glue import GlueCatalog

        return GlueCatalog(settings.name, **props)
    from pyiceberg.catalog.hive import HiveCatalog

    return HiveCatalog(settings.name, **props)
