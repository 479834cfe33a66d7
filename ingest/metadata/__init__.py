"""The metadata store: topics, partitions, the stream -> object index, offsets.

Open one with :func:`open_metadata_store`::

    store = open_metadata_store("sqlite:///var/lib/tidelake/metadata.db")
    store = open_metadata_store("memory://")
    store = open_metadata_store("postgresql://user:pass@host:5432/db?schema=tidelake")
"""

from __future__ import annotations

from ingest.metadata.api import (
    AclRecord,
    CommittedOffset,
    MetadataStore,
    ObjectRange,
    ObjectRecord,
    PartitionRecord,
    ScramCredentialRecord,
    StreamRecord,
    TopicRecord,
    Writer,
)
from ingest.metadata.errors import (
    MetadataError,
    StreamNotOwnedError,
    TopicExistsError,
    UnknownStreamError,
    UnknownTopicError,
    WriterFencedError,
)
from ingest.metadata.factory import open_metadata_store
from ingest.metadata.memory import MemoryMetadataStore
from ingest.metadata.postgres import PostgresMetadataStore
from ingest.metadata.sqlite import SqliteMetadataStore

__all__ = [
    "AclRecord",
    "CommittedOffset",
    "MemoryMetadataStore",
    "MetadataError",
    "MetadataStore",
    "ObjectRange",
    "ObjectRecord",
    "PartitionRecord",
    "ScramCredentialRecord",
    "PostgresMetadataStore",
    "SqliteMetadataStore",
    "StreamNotOwnedError",
    "StreamRecord",
    "TopicExistsError",
    "TopicRecord",
    "UnknownStreamError",
    "UnknownTopicError",
    "Writer",
    "WriterFencedError",
    "open_metadata_store",
]
