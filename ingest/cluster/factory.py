"""Open the cluster store named by a cluster's ``metadata_url``."""

from __future__ import annotations

from urllib.parse import urlsplit

from ingest.cluster.api import ClusterStore
from ingest.errors import ConfigError

__all__ = ["open_cluster_store"]


def open_cluster_store(url: str) -> ClusterStore:
    """The cluster store behind ``url``:

    - ``postgresql://user@host:5432/db[?schema=name]`` (or ``postgres://``):
      :class:`~ingest.cluster.postgres.PostgresClusterStore`, the real thing
    - ``memory://``: a fresh :class:`~ingest.cluster.memory.MemoryClusterStore`
      of its own (tests; several brokers share one through ``peer()``)

    Anything else raises ``ConfigError`` naming ``metadata_url``: brokers
    agree through the metadata database, so a cluster cannot run on SQLite.
    """
    scheme = urlsplit(url).scheme.lower()
    if scheme in ("postgresql", "postgres"):
        from ingest.cluster.postgres import PostgresClusterStore

        return PostgresClusterStore(url)
    if scheme == "memory":
        from ingest.cluster.memory import MemoryClusterStore

        return MemoryClusterStore()
    raise ConfigError(
        "metadata_url",
        "a cluster needs a PostgreSQL metadata_url (postgresql://user@host:5432/db), "
        f"got scheme {scheme!r}",
    )
