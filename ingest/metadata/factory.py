"""Open a metadata store from a URL, keyed by scheme."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from ingest.errors import ConfigError
from ingest.metadata.api import MetadataStore

__all__ = ["open_metadata_store"]


def _open_sqlite(url: str) -> MetadataStore:
    from ingest.metadata.sqlite import SqliteMetadataStore

    # sqlite:///relative/or/absolute? Follow SQLAlchemy: sqlite:///rel.db is
    # relative, sqlite:////abs.db is absolute; sqlite:///:memory: is private.
    rest = url[len("sqlite://") :]
    if not rest.startswith("/") or rest == "/":
        raise ConfigError("metadata_url", f"expected sqlite:///path, got {url!r}")
    path = rest[1:]
    return SqliteMetadataStore(path)


def _open_memory(url: str) -> MetadataStore:
    from ingest.metadata.memory import MemoryMetadataStore

    return MemoryMetadataStore()


def _open_postgresql(url: str) -> MetadataStore:
    from ingest.metadata.postgres import PostgresMetadataStore

    return PostgresMetadataStore(url)


_OPENERS: dict[str, Callable[[str], MetadataStore]] = {
    "sqlite": _open_sqlite,
    "memory": _open_memory,
    "postgresql": _open_postgresql,
    "postgres": _open_postgresql,
}


def open_metadata_store(url: str) -> MetadataStore:
    """Open the store named by ``url``.

    - ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``
      (SQLAlchemy style; ``sqlite:///:memory:`` is a private in-process db)
    - ``memory://`` (no durability; tests)
    - ``postgresql://user:pass@host:5432/db[?schema=name]`` (clusters)

    Raises ``ConfigError`` for an unknown scheme or a malformed URL.
    """
    scheme = urlsplit(url).scheme.lower()
    opener = _OPENERS.get(scheme)
    if opener is None:
        raise ConfigError(
            "metadata_url", f"unknown scheme {scheme!r} (expected one of {sorted(_OPENERS)})"
        )
    return opener(url)
