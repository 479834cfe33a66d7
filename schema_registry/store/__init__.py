"""Registry storage: a small SchemaStore contract and implementations keyed by URL scheme.

``memory://`` (tests), ``sqlite:////abs/path/schemas.db`` (embedded default),
``postgresql://user@host/db`` (cluster; every broker shares it).
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from ingest.errors import ConfigError
from schema_registry.store.base import (
    DEFAULT_CONTEXT,
    Reference,
    SchemaStore,
    StoredSchema,
    StoreTransaction,
    SubjectVersion,
    context_of,
)
from schema_registry.store.memory import MemorySchemaStore

__all__ = [
    "DEFAULT_CONTEXT",
    "MemorySchemaStore",
    "Reference",
    "SchemaStore",
    "StoredSchema",
    "StoreTransaction",
    "SubjectVersion",
    "context_of",
    "open_store",
]


def open_store(url: str) -> SchemaStore:
    """Open the store named by ``url``; a ``postgresql`` URL may carry ``?schema=<name>``."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "memory":
        return MemorySchemaStore()
    if scheme == "sqlite":
        from schema_registry.store.sqlite import SqliteSchemaStore

        path = url[len("sqlite:///") :].split("?", 1)[0] if url.startswith("sqlite:///") else ""
        if not path:
            raise ConfigError(
                "store_url", "sqlite URL needs a path: sqlite:////abs/path/schemas.db"
            )
        return SqliteSchemaStore(path)
    if scheme in ("postgresql", "postgres"):
        from schema_registry.store.postgres import PostgresSchemaStore

        query = parse_qs(parts.query)
        schema = query.pop("schema", [None])[0]
        dsn = parts._replace(query="&".join(f"{k}={v[0]}" for k, v in query.items())).geturl()
        return PostgresSchemaStore(dsn, schema=schema)
    raise ConfigError("store_url", f"unsupported scheme {parts.scheme!r} in {url!r}")
