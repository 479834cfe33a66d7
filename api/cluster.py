"""Process assembly for a broker of a cluster.

Brokers that share a PostgreSQL ``metadata_url`` and an object store form one
cluster. Each broker writes its stream objects and its object write-ahead
log under prefixes of its own (``<object_prefix>node-<id>/`` and
``<wal_object_prefix>node-<id>/``), so any other broker can find and replay a
dead broker's log by its node id.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from api.settings import Settings, shared_metadata
from catalog.config import CatalogType
from ingest.cluster.api import BrokerInfo
from ingest.cluster.factory import open_cluster_store
from ingest.cluster.hooks import ClusterSetup
from ingest.errors import ConfigError, StorageError
from ingest.metadata.api import MetadataStore
from ingest.s3stream.config import S3StreamConfig
from ingest.s3stream.factory import open_engine
from ingest.s3stream.objectstore.api import ObjectStore

__all__ = [
    "cluster_setup",
    "is_clustered",
    "node_storage",
    "open_cluster_catalog",
    "shared_services",
]


def is_clustered(settings: Settings) -> bool:
    """A PostgreSQL metadata store is shared by the brokers of a cluster."""
    return shared_metadata(settings.metadata_url)


# Key of the session advisory lock under which brokers open the shared SQL catalog.
_CATALOG_INIT_LOCK = 0x7469_6465_6361  # "tideca"


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def shared_services(settings: Settings) -> str:
    """Which schema registry store and catalog this broker uses (passwords hidden)."""
    cat = settings.catalog
    where = cat.uri if cat.type is CatalogType.SQL else cat.uri or cat.hive_uri or cat.glue_region
    return (
        f"schema registry store {_redact(settings.registry.store_url)}, "
        f"{cat.type.value} catalog {cat.name!r} at {_redact(str(where or 'default'))} "
        f"(warehouse {cat.default_warehouse()})"
    )


def open_cluster_catalog(settings: Settings) -> Any:
    """The platform catalog of a broker of a cluster. Brokers start together, and
    pyiceberg's SqlCatalog creates its tables when they are missing, which races
    on PostgreSQL: a SQL catalog on PostgreSQL is opened under an advisory lock
    of its database, so the first broker creates the tables and the others find them."""
    from catalog.factory import load_platform_catalog

    cat = settings.catalog
    uri = cat.uri or ""
    scheme, _, rest = uri.partition("://")
    if cat.type is not CatalogType.SQL or not scheme.startswith("postgres"):
        return load_platform_catalog(cat)
    import psycopg2

    conn = psycopg2.connect(f"postgresql://{rest}", connect_timeout=10)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_lock(%s)", (_CATALOG_INIT_LOCK,))
        return load_platform_catalog(cat)
    finally:
        conn.close()  # ends the session, which releases the lock


def node_storage(settings: Settings, node_id: int) -> S3StreamConfig:
    """The storage settings of node ``node_id``: its own object and WAL prefixes."""
    st = settings.storage
    return st.model_copy(
        update={
            "object_prefix": f"{st.object_prefix}node-{node_id}/",
            "wal_object_prefix": f"{st.wal_object_prefix}node-{node_id}/",
        }
    )


def _check(settings: Settings) -> None:
    if settings.storage.wal_kind != "object" and not settings.cluster.allow_local_wal:
        raise ConfigError(
            "storage.wal_kind",
            'a broker of a cluster (a PostgreSQL metadata_url) needs wal_kind = "object": '
            "with a local file WAL, the records it acknowledged die with its disk and no "
            "other broker can take its partitions over. Set cluster.allow_local_wal = true "
            "to run it anyway (testing only)",
        )
    if urlsplit(settings.object_store_url).scheme not in ("s3", "file"):
        raise ConfigError(
            "object_store_url",
            "a cluster needs an object store every broker reaches (s3://..., or file:// "
            "on one machine)",
        )


def cluster_setup(
    settings: Settings, metadata: MetadataStore, objects: ObjectStore
) -> ClusterSetup:
    """Everything :class:`ingest.broker.Broker` needs to join the cluster."""
    _check(settings)
    node_id = settings.broker.node_id

    async def recover(broker: BrokerInfo) -> None:
        """Replay a dead broker's object WAL into objects: its engine is opened
        here under its prefixes, which fences the broker if it still runs,
        uploads every record it acknowledged, and closes."""
        config = node_storage(settings, broker.node_id).model_copy(
            update={"wal_kind": "object", "sweep_orphans_on_start": False}
        )
        engine = open_engine(config, metadata, objects)
        await engine.start()
        await engine.close()
        if not engine.closed_cleanly:
            raise StorageError(
                f"could not upload the write-ahead log of node {broker.node_id}; "
                "its partitions stay where they are until a later attempt succeeds"
            )

    return ClusterSetup(
        store=open_cluster_store(settings.metadata_url),
        config=settings.cluster,
        rack=settings.broker.rack,
        object_prefix=node_storage(settings, node_id).wal_object_prefix,
        recover=recover,
    )
