"""The metadata store contract.

One store holds everything a broker must not keep only in memory and that is
not stream data: topics and their configs, partitions and the stream behind
each, the stream -> object index of the S3Stream engine, consumer group
offsets, and producer-id allocation. The embedded default is SQLite; a
PostgreSQL implementation serves clusters. Methods are synchronous and
transactional (each call is one transaction); async callers run them in a
worker thread.

Writer epochs fence a superseded writer: a process that writes the S3Stream
index under one name (the engine's object prefix) first calls
``claim_writer(name)`` and passes ``writer=(name, epoch)`` to every call that
changes stream data. Each such call checks, in its own transaction, that the
epoch is still the name's current one and otherwise raises
``WriterFencedError`` having changed nothing; so once a successor's claim
has returned, nothing of the old writer is committed any more.

Stream owners fence per stream, between writers of different names (the
brokers of a cluster): ``claim_streams`` makes a writer the owner of streams
(a partition moved to its broker). From then on a commit with a writer that
would *add* offsets to a stream owned by another writer, and a trim by a
non-owner, raise ``StreamNotOwnedError`` having changed nothing; rewriting
offsets the stream already has (compaction) needs no ownership. A stream
nobody claimed (``owner`` is ``None``, as every stream of a single broker) is
open to every writer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "TopicRecord",
    "PartitionRecord",
    "StreamRecord",
    "ObjectRecord",
    "ObjectRange",
    "CommittedOffset",
    "MetadataStore",
    "Writer",
    "AbortedTxn",
    "TxnCheckpoint",
]

Writer = tuple[str, int]
"""(writer name, epoch) as returned by ``claim_writer``."""


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    topic_id: str  # UUID as text
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    topic: str
    partition: int
    stream_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class StreamRecord:
    stream_id: int
    start_offset: int
    end_offset: int  # end of the data committed to objects (exclusive)
    deleted: bool = False
    owner: str | None = None  # the writer name that last claimed it (claim_streams)
    owner_epoch: int = 0  # grows by one with every claim


@dataclass(frozen=True, slots=True)
class ObjectRange:
    """Where one stream's offsets [start, end) sit inside an object."""

    stream_id: int
    start_offset: int
    end_offset: int
    position: int
    length: int


@dataclass(frozen=True, slots=True)
class ObjectRecord:
    object_id: int
    key: str
    size: int
    kind: str  # "stream_set" | "stream"
    ranges: tuple[ObjectRange, ...]
    created_ms: int = 0


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_ms: int


@dataclass(frozen=True, slots=True)
class ScramCredentialRecord:
    """One user's SCRAM credential for one mechanism: salted, iterated keys,
    never the password (RFC 5802)."""

    user: str
    mechanism: str  # SCRAM-SHA-256 | SCRAM-SHA-512
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True, slots=True)
class AclRecord:
    """One ACL binding as stored: Kafka's wire codes for the enums."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An aborted transaction in one partition: its producer, its first
    offset there and the offset of its abort marker."""

    producer_id: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class TxnCheckpoint:
    """A partition's transaction state as of ``stable_offset``: every
    transaction starting below it has ended (its marker is durable), and
    ``aborted`` lists those that aborted (above the log start). A reopened
    partition rebuilds the rest by scanning its log from ``stable_offset``."""

    stable_offset: int
    aborted: tuple[AbortedTxn, ...] = ()


class MetadataStore(Protocol):
    # --- topics and partitions -------------------------------------------
    def create_topic(self, topic: TopicRecord, stream_ids: Sequence[int]) -> None:
        """Create a topic and its partitions (partition i -> stream_ids[i]).

        Raises ``TopicExistsError`` if the name is taken.
        """

    def get_topic(self, name: str) -> TopicRecord | None: ...

    def list_topics(self) -> list[TopicRecord]: ...

    def delete_topic(self, name: str) -> list[int]:
        """Delete a topic; returns the stream ids of its partitions."""

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace the topic's config overrides."""

    def add_partitions(self, name: str, stream_ids: Sequence[int]) -> None:
        """Append partitions backed by ``stream_ids``."""

    def list_partitions(self, topic: str) -> list[PartitionRecord]: ...

    # --- streams and objects (S3Stream index) ----------------------------
    def create_stream(self, *, writer: Writer | None = None) -> int:
        """Allocate a new stream id (never reused)."""

    def get_stream(self, stream_id: int) -> StreamRecord | None: ...

    def list_streams(self) -> list[StreamRecord]: ...

    def trim_stream(
        self, stream_id: int, start_offset: int, *, writer: Writer | None = None
    ) -> None:
        """Raise the stream's start offset to ``start_offset`` (never lowers it).

        With ``writer``, the stream's owner must be ``None`` or the writer's
        name, else ``StreamNotOwnedError``."""

    def delete_stream(self, stream_id: int, *, writer: Writer | None = None) -> None:
        """Mark the stream deleted; its objects become garbage. Any writer may
        delete a stream, whoever owns it (any broker deletes a topic)."""

    def next_object_id(self) -> int: ...

    def claim_writer(self, name: str) -> int:
        """Make the caller the current writer ``name``: atomically raise the
        name's epoch by one and return it (the first claim returns 1). Two
        claims, from any processes sharing the store, never get the same
        epoch; every earlier epoch of ``name`` is fenced from then on."""

    def claim_streams(self, stream_ids: Sequence[int], *, writer: Writer) -> dict[int, int]:
        """Make ``writer``'s name the owner of every stream of ``stream_ids``,
        in one transaction: check the writer's epoch (``WriterFencedError``),
        then raise each stream's ``owner_epoch`` by one. Returns
        ``{stream_id: new owner_epoch}``. Raises ``UnknownStreamError`` (and
        claims nothing) if a stream is unknown or deleted. Once this returned,
        the previous owner's commits that add to these streams are refused."""

    def commit_object(
        self, obj: ObjectRecord, compacted: Iterable[int] = (), *, writer: Writer | None = None
    ) -> None:
        """Atomically add ``obj`` (advancing each stream's end_offset) and
        remove the objects whose ids are in ``compacted``.

        With ``writer``, this and the other stream data changes
        (``commit_objects``, ``delete_objects``, ``trim_stream``) first check
        in the same transaction that the writer's epoch is current, else
        raise ``WriterFencedError`` and change nothing. Then every range that
        adds offsets to its stream (its ``end_offset`` beyond the stream's)
        requires the stream's owner to be ``None`` or the writer's name, else
        ``StreamNotOwnedError`` and nothing changes; ranges within the
        stream's end (compaction) need no ownership. Unknown streams raise
        ``UnknownStreamError``."""

    def commit_objects(
        self,
        objs: Sequence[ObjectRecord],
        compacted: Iterable[int] = (),
        *,
        writer: Writer | None = None,
    ) -> None:
        """Atomically add every object of ``objs`` and remove ``compacted``: a
        compaction that splits its input into several objects becomes visible
        all at once, or not at all."""

    def objects_for_stream(
        self, stream_id: int, start_offset: int, end_offset: int, limit: int | None = None
    ) -> list[ObjectRecord]:
        """Objects holding any of [start_offset, end_offset) of the stream, by
        offset (the first ``limit`` of them when given)."""

    def list_objects(self) -> list[ObjectRecord]: ...

    def delete_objects(
        self, object_ids: Iterable[int], *, writer: Writer | None = None
    ) -> None: ...

    # --- consumer groups ---------------------------------------------------
    def commit_offsets(self, group: str, offsets: Sequence[CommittedOffset]) -> None: ...

    def fetch_offsets(
        self, group: str, topics: Iterable[str] | None = None
    ) -> list[CommittedOffset]: ...

    def delete_group_offsets(self, group: str) -> None: ...

    def list_offset_groups(self) -> list[str]: ...

    # --- producers -----------------------------------------------------------
    def allocate_producer_id(self) -> int:
        """A producer id never handed out before."""

    # --- partitions' transaction checkpoints (by stream id) --------------------
    def get_txn_checkpoint(self, stream_id: int) -> TxnCheckpoint | None:
        """The stream's last checkpoint, or ``None`` if it never had one."""

    def put_txn_checkpoint(self, stream_id: int, checkpoint: TxnCheckpoint) -> None:
        """Replace the stream's checkpoint (the latest call wins)."""

    # --- generic key/value (small durable settings, e.g. cluster id) ---------
    def get_kv(self, key: str) -> str | None: ...

    def put_kv(self, key: str, value: str) -> None: ...

    def list_kv(self, prefix: str) -> dict[str, str]:
        """Every key that starts with ``prefix``, with its value."""

    def delete_kv(self, key: str) -> None:
        """Forget ``key`` (nothing happens when it is unknown)."""

    # --- SASL/SCRAM credentials ------------------------------------------------
    def put_scram_credential(self, record: ScramCredentialRecord) -> None:
        """Store (or replace) ``record.user``'s credential for ``record.mechanism``."""

    def get_scram_credential(self, user: str, mechanism: str) -> ScramCredentialRecord | None: ...

    def delete_scram_credentials(self, user: str, mechanism: str | None = None) -> bool:
        """Remove the user's credential for ``mechanism`` (every mechanism when
        ``None``); True when something was removed."""

    def list_scram_credentials(self, user: str | None = None) -> list[ScramCredentialRecord]:
        """Every credential (of ``user`` when given), ordered by user, mechanism."""

    # --- ACL bindings ------------------------------------------------------------
    def put_acl(self, record: AclRecord) -> bool:
        """Store ``record``; False (and no change) when it is already stored."""

    def delete_acl(self, record: AclRecord) -> bool:
        """Remove ``record``; True when it was stored."""

    def list_acls(self) -> list[AclRecord]: ...

    def acl_version(self) -> int:
        """Raised by every change that ``put_acl`` / ``delete_acl`` made."""

    def close(self) -> None: ...
