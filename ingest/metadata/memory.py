"""An in-memory metadata store (tests and throwaway brokers).

Same semantics as :class:`~ingest.metadata.sqlite.SqliteMetadataStore`, no
durability. Thread-safe: every call holds one lock, so each call is atomic.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ingest.metadata.api import (
    CommittedOffset,
    ObjectRecord,
    PartitionRecord,
    StreamRecord,
    TopicRecord,
    Writer,
)
from ingest.metadata.errors import (
    TopicExistsError,
    UnknownStreamError,
    UnknownTopicError,
    ensure_current_epoch,
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
                    self._stream(r.stream_id)
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

    def get_kv(self, key: str) -> str | None:
        with self._lock:
            return self._kv.get(key)

    def put_kv(self, key: str, value: str) -> None:
        with self._lock:
            self._kv[key] = value

    def close(self) -> None:
        pass

    def _stream(self, stream_id: int) -> StreamRecord:
        rec = self._streams.get(stream_id)
        if rec is None:
            raise UnknownStreamError(f"unknown stream {stream_id}")
        return rec
