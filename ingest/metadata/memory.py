"""An in-memory metadata store (tests and throwaway brokers).

Same semantics as :class:`~ingest.metadata.sqlite.SqliteMetadataStore`, no
durability. Thread-safe: every call holds one lock, so each call is atomic.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ingest.metadata.api import (
    AclRecord,
    CommittedOffset,
    ObjectRecord,
    PartitionRecord,
    ScramCredentialRecord,
    StreamRecord,
    TopicRecord,
    TxnCheckpoint,
    Writer,
)
from ingest.metadata.errors import (
    TopicExistsError,
    UnknownStreamError,
    UnknownTopicError,
    ensure_current_epoch,
    ensure_owner,
)

__all__ = ["MemoryMetadataStore"]


class MemoryMetadataStore:
    """A :class:`~ingest.metadata.api.MetadataStore` held in dictionaries."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._topics: dict[str, TopicRecord] = {}
        self._partitions: dict[str, list[PartitionRecord]] = {}
        self._streams: dict[int, StreamRecord] = {}
        self._objects: dict[int, ObjectRecord] = {}
        self._offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        self._kv: dict[str, str] = {}
        self._txn_checkpoints: dict[int, TxnCheckpoint] = {}
        self._scram: dict[tuple[str, str], ScramCredentialRecord] = {}
        self._acls: set[AclRecord] = set()
        self._acl_version = 0
        self._writers: dict[str, int] = {}
        self._next_stream_id = 1
        self._next_object_id = 1
        self._next_producer_id = 1

    # --- topics and partitions -------------------------------------------
    def create_topic(self, topic: TopicRecord, stream_ids: Sequence[int]) -> None:
        with self._lock:
            if topic.name in self._topics:
                raise TopicExistsError(f"topic {topic.name!r} already exists")
            self._topics[topic.name] = replace(topic, configs=dict(topic.configs))
            self._partitions[topic.name] = [
                PartitionRecord(topic.name, i, sid, 0) for i, sid in enumerate(stream_ids)
            ]

    def get_topic(self, name: str) -> TopicRecord | None:
        with self._lock:
            topic = self._topics.get(name)
            return None if topic is None else replace(topic, configs=dict(topic.configs))

    def list_topics(self) -> list[TopicRecord]:
        with self._lock:
            return [replace(t, configs=dict(t.configs)) for _, t in sorted(self._topics.items())]

    def delete_topic(self, name: str) -> list[int]:
        with self._lock:
            if name not in self._topics:
                raise UnknownTopicError(f"unknown topic {name!r}")
            del self._topics[name]
            parts = self._partitions.pop(name, [])
            return [p.stream_id for p in parts]

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        with self._lock:
            topic = self._topics.get(name)
            if topic is None:
                raise UnknownTopicError(f"unknown topic {name!r}")
            self._topics[name] = replace(topic, configs=dict(configs))

    def add_partitions(self, name: str, stream_ids: Sequence[int]) -> None:
        with self._lock:
            topic = self._topics.get(name)
            if topic is None:
                raise UnknownTopicError(f"unknown topic {name!r}")
            parts = self._partitions[name]
            for sid in stream_ids:
                parts.append(PartitionRecord(name, len(parts), sid, 0))
            self._topics[name] = replace(topic, partitions=len(parts))

    def list_partitions(self, topic: str) -> list[PartitionRecord]:
        with self._lock:
            if topic not in self._topics:
                raise UnknownTopicError(f"unknown topic {topic!r}")
            return list(self._partitions[topic])

    # --- streams and objects -------------------------------------------------
    def create_stream(self, *, writer: Writer | None = None) -> int:
        with self._lock:
            self._check_writer(writer)
            sid = self._next_stream_id
            self._next_stream_id += 1
            self._streams[sid] = StreamRecord(sid, 0, 0)
            return sid

    def get_stream(self, stream_id: int) -> StreamRecord | None:
        with self._lock:
            return self._streams.get(stream_id)

    def list_streams(self) -> list[StreamRecord]:
        with self._lock:
            return [self._streams[k] for k in sorted(self._streams)]

    def trim_stream(
        self, stream_id: int, start_offset: int, *, writer: Writer | None = None
    ) -> None:
        with self._lock:
            self._check_writer(writer)
            rec = self._stream(stream_id)
            if writer is not None:
                ensure_owner(stream_id, rec.owner, writer[0])
            if start_offset > rec.start_offset:
                self._streams[stream_id] = replace(rec, start_offset=start_offset)

    def delete_stream(self, stream_id: int, *, writer: Writer | None = None) -> None:
        with self._lock:
            self._check_writer(writer)
            rec = self._stream(stream_id)
            self._streams[stream_id] = replace(rec, deleted=True)

    def next_object_id(self) -> int:
        with self._lock:
            oid = self._next_object_id
            self._next_object_id += 1
            return oid

    def claim_writer(self, name: str) -> int:
        with self._lock:
            epoch = self._writers.get(name, 0) + 1
            self._writers[name] = epoch
            return epoch

    def claim_streams(self, stream_ids: Sequence[int], *, writer: Writer) -> dict[int, int]:
        with self._lock:
            self._check_writer(writer)
            ids = sorted(set(stream_ids))
            for sid in ids:  # validate everything before changing anything
                if self._stream(sid).deleted:
                    raise UnknownStreamError(f"unknown or deleted stream {sid}")
            claimed: dict[int, int] = {}
            for sid in ids:
                rec = self._streams[sid]
                self._streams[sid] = replace(rec, owner=writer[0], owner_epoch=rec.owner_epoch + 1)
                claimed[sid] = rec.owner_epoch + 1
            return claimed

    def _check_writer(self, writer: Writer | None) -> None:
        if writer is None:
            return
        name, epoch = writer
        ensure_current_epoch(name, epoch, self._writers.get(name, 0))

    def commit_object(
        self, obj: ObjectRecord, compacted: Iterable[int] = (), *, writer: Writer | None = None
    ) -> None:
        self.commit_objects([obj], compacted, writer=writer)

    def commit_objects(
        self,
        objs: Sequence[ObjectRecord],
        compacted: Iterable[int] = (),
        *,
        writer: Writer | None = None,
    ) -> None:
        with self._lock:
            self._check_writer(writer)
            for obj in objs:  # validate everything before changing anything
                for r in obj.ranges:
                    rec = self._stream(r.stream_id)
                    if writer is not None and r.end_offset > rec.end_offset:
                        ensure_owner(r.stream_id, rec.owner, writer[0])
            for obj in objs:
                for r in obj.ranges:
                    rec = self._streams[r.stream_id]
                    if r.end_offset > rec.end_offset:
                        self._streams[r.stream_id] = replace(rec, end_offset=r.end_offset)
                self._objects[obj.object_id] = obj
                if obj.object_id >= self._next_object_id:
                    self._next_object_id = obj.object_id + 1
            for oid in compacted:
                self._objects.pop(oid, None)

    def objects_for_stream(
        self, stream_id: int, start_offset: int, end_offset: int, limit: int | None = None
    ) -> list[ObjectRecord]:
        with self._lock:
            found: list[tuple[int, int, ObjectRecord]] = []
            for obj in self._objects.values():
                for r in obj.ranges:
                    if (
                        r.stream_id == stream_id
                        and r.end_offset > start_offset
                        and r.start_offset < end_offset
                    ):
                        found.append((r.start_offset, obj.object_id, obj))
                        break
            found.sort(key=lambda t: (t[0], t[1]))
            return [o for _, _, o in found][:limit]

    def list_objects(self) -> list[ObjectRecord]:
        with self._lock:
            return [self._objects[k] for k in sorted(self._objects)]

    def delete_objects(self, object_ids: Iterable[int], *, writer: Writer | None = None) -> None:
        with self._lock:
            self._check_writer(writer)
            for oid in object_ids:
                self._objects.pop(oid, None)

    # --- consumer groups ---------------------------------------------------------
    def commit_offsets(self, group: str, offsets: Sequence[CommittedOffset]) -> None:
        with self._lock:
            g = self._offsets.setdefault(group, {})
            for o in offsets:
                g[(o.topic, o.partition)] = o

    def fetch_offsets(
        self, group: str, topics: Iterable[str] | None = None
    ) -> list[CommittedOffset]:
        with self._lock:
            g = self._offsets.get(group, {})
            wanted = None if topics is None else set(topics)
            return [g[k] for k in sorted(g) if wanted is None or k[0] in wanted]

    def delete_group_offsets(self, group: str) -> None:
        with self._lock:
            self._offsets.pop(group, None)

    def list_offset_groups(self) -> list[str]:
        with self._lock:
            return sorted(g for g, offs in self._offsets.items() if offs)

    # --- producers and key/value ------------------------------------------------
    def allocate_producer_id(self) -> int:
        with self._lock:
            pid = self._next_producer_id
            self._next_producer_id += 1
            return pid

    def get_txn_checkpoint(self, stream_id: int) -> TxnCheckpoint | None:
        with self._lock:
            return self._txn_checkpoints.get(stream_id)

    def put_txn_checkpoint(self, stream_id: int, checkpoint: TxnCheckpoint) -> None:
        with self._lock:
            aborted = tuple(checkpoint.aborted)  # frozen entries: a copy of the tuple suffices
            self._txn_checkpoints[stream_id] = TxnCheckpoint(checkpoint.stable_offset, aborted)

    def get_kv(self, key: str) -> str | None:
        with self._lock:
            return self._kv.get(key)

    def put_kv(self, key: str, value: str) -> None:
        with self._lock:
            self._kv[key] = value

    def list_kv(self, prefix: str) -> dict[str, str]:
        with self._lock:
            return {k: v for k, v in self._kv.items() if k.startswith(prefix)}

    def delete_kv(self, key: str) -> None:
        with self._lock:
            self._kv.pop(key, None)

    def put_scram_credential(self, record: ScramCredentialRecord) -> None:
        with self._lock:
            self._scram[(record.user, record.mechanism)] = record

    def get_scram_credential(self, user: str, mechanism: str) -> ScramCredentialRecord | None:
        with self._lock:
            return self._scram.get((user, mechanism))

    def delete_scram_credentials(self, user: str, mechanism: str | None = None) -> bool:
        with self._lock:
            keys = [k for k in self._scram if k[0] == user and mechanism in (None, k[1])]
            for k in keys:
                del self._scram[k]
            return bool(keys)

    def list_scram_credentials(self, user: str | None = None) -> list[ScramCredentialRecord]:
        with self._lock:
            return [r for k, r in sorted(self._scram.items()) if user in (None, k[0])]

    def put_acl(self, record: AclRecord) -> bool:
        with self._lock:
            if record in self._acls:
                return False
            self._acls.add(record)
            self._acl_version += 1
            return True

    def delete_acl(self, record: AclRecord) -> bool:
        with self._lock:
            if record not in self._acls:
                return False
            self._acls.discard(record)
            self._acl_version += 1
            return True

    def list_acls(self) -> list[AclRecord]:
        with self._lock:
            return sorted(
                self._acls,
                key=lambda r: (
                    r.resource_type,
                    r.resource_name,
                    r.pattern_type,
                    r.principal,
                    r.host,
                    r.operation,
                    r.permission_type,
                ),
            )

    def acl_version(self) -> int:
        with self._lock:
            return self._acl_version

    def close(self) -> None:
        pass

    def _stream(self, stream_id: int) -> StreamRecord:
        rec = self._streams.get(stream_id)
        if rec is None:
            raise UnknownStreamError(f"unknown stream {stream_id}")
        return rec
