"""Topics and their partition logs.

The metadata store is the source of truth; this manager keeps an in-memory
view for the request path (no store round trip to produce or fetch) and
serialises topic changes.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from ingest.log.partition import PartitionLog
from ingest.log.topic_config import TopicConfig, TopicConfigRegistry
from ingest.metadata.api import MetadataStore, TopicRecord
from ingest.protocol.errors import ErrorCode, KafkaError, error_class
from ingest.s3stream.api import StreamEngine

__all__ = ["LogManager", "Topic", "TopicListener", "validate_topic_name"]

log = logging.getLogger(__name__)

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
_MAX_NAME = 249


def validate_topic_name(name: str) -> None:
    """Kafka's topic name rules; raises INVALID_TOPIC_EXCEPTION."""
    err = error_class(ErrorCode.invalid_topic_exception)
    if not name:
        raise err("topic name is empty")
    if name in (".", ".."):
        raise err(f"topic name cannot be {name!r}")
    if len(name) > _MAX_NAME:
        raise err(f"topic name is longer than {_MAX_NAME} characters")
    if not _LEGAL.match(name):
        raise err(
            f"topic name {name!r} contains characters other than ASCII alphanumerics, '.', '_' and '-'"
        )


@dataclass
class Topic:
    record: TopicRecord
    partitions: list[PartitionLog] = field(default_factory=list)
    config: TopicConfig | None = None

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def topic_id(self) -> uuid.UUID:
        return uuid.UUID(self.record.topic_id)


class TopicListener:
    """Hook for other rooms (table topics) to follow topic lifecycle and appends.

    The process assembly registers implementations; the broker never imports
    them. Methods must not block.
    """

    def on_topic_created(self, topic: Topic) -> None:  # pragma: no cover - default no-op
        pass

    def on_topic_deleted(self, name: str) -> None:  # pragma: no cover
        pass

    def on_topic_config_changed(self, topic: Topic) -> None:  # pragma: no cover
        pass


class LogManager:
    def __init__(
        self, store: MetadataStore, engine: StreamEngine, configs: TopicConfigRegistry
    ) -> None:
        self.store = store
        self.engine = engine
        self.configs = configs
        self.topics: dict[str, Topic] = {}
        self.topics_by_id: dict[uuid.UUID, Topic] = {}
        self._lock = asyncio.Lock()
        self.listeners: list[TopicListener] = []

    async def load(self) -> None:
        """Open every topic in the metadata store."""
        records = await asyncio.to_thread(self.store.list_topics)
        for rec in records:
            parts = await asyncio.to_thread(self.store.list_partitions, rec.name)
            topic = Topic(rec, config=self.configs.resolved(rec.configs))
            for p in sorted(parts, key=lambda p: p.partition):
                stream = await self.engine.open_stream(p.stream_id)
                topic.partitions.append(
                    self._partition_log(topic, p.partition, stream, p.leader_epoch)
                )
            self._register(topic)
        for topic in self.topics.values():
            for plog in topic.partitions:
                try:
                    await plog.rebuild_producer_state()
                except Exception:
                    log.exception(
                        "cannot rebuild producer state of %s-%d", topic.name, plog.partition
                    )
        log.info("loaded %d topics", len(records))

    def _partition_log(
        self, topic: Topic, index: int, stream: object, epoch: int = 0
    ) -> PartitionLog:
        def config() -> TopicConfig:
            assert topic.config is not None
            return topic.config

        return PartitionLog(topic.name, index, stream, config, epoch)  # type: ignore[arg-type]

    def _register(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.topics_by_id[topic.topic_id] = topic

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def partition(self, name: str, index: int) -> PartitionLog | None:
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        *,
        validate_only: bool = False,
    ) -> Topic | None:
        validate_topic_name(name)
        if partitions <= 0:
            raise error_class(ErrorCode.invalid_partitions)(
                f"number of partitions must be positive, got {partitions}"
            )
        if partitions > 100_000:
            raise error_class(ErrorCode.invalid_partitions)("too many partitions")
        if replication_factor <= 0:
            raise error_class(ErrorCode.invalid_replication_factor)(
                f"replication factor must be positive, got {replication_factor}"
            )
        overrides = self.configs.validate(configs)
        async with self._lock:
            if name in self.topics:
                raise error_class(ErrorCode.topic_already_exists)(f"topic {name!r} already exists")
            # As in Kafka: '.' and '_' collide in metric names, so names that
            # differ only by them cannot both exist.
            folded = name.replace(".", "_")
            clash = next((t for t in self.topics if t.replace(".", "_") == folded), None)
            if clash is not None:
                raise error_class(ErrorCode.invalid_topic_exception)(
                    f"topic {name!r} collides with existing topic {clash!r} ('.' and '_' are interchangeable)"
                )
            if validate_only:
                return None
            record = TopicRecord(name, str(uuid.uuid4()), partitions, replication_factor, overrides)
            streams = [await self.engine.create_stream() for _ in range(partitions)]
            await asyncio.to_thread(self.store.create_topic, record, [s.stream_id for s in streams])
            topic = Topic(record, config=self.configs.resolved(overrides))
            topic.partitions = [self._partition_log(topic, i, s) for i, s in enumerate(streams)]
            self._register(topic)
        for listener in self.listeners:
            listener.on_topic_created(topic)
        return topic

    async def delete_topic(self, name: str) -> None:
        async with self._lock:
            topic = self.topics.get(name)
            if topic is None:
                raise error_class(ErrorCode.unknown_topic_or_partition)(
                    f"topic {name!r} does not exist"
                )
            stream_ids = await asyncio.to_thread(self.store.delete_topic, name)
            del self.topics[name]
            self.topics_by_id.pop(topic.topic_id, None)
            for sid in stream_ids:
                await self.engine.delete_stream(sid)
            for p in topic.partitions:
                p._wake_readers()
        for listener in self.listeners:
            listener.on_topic_deleted(name)

    async def create_partitions(
        self, name: str, count: int, *, validate_only: bool = False
    ) -> None:
        async with self._lock:
            topic = self.topics.get(name)
            if topic is None:
                raise error_class(ErrorCode.unknown_topic_or_partition)(
                    f"topic {name!r} does not exist"
                )
            current = len(topic.partitions)
            if count <= current:
                raise error_class(ErrorCode.invalid_partitions)(
                    f"topic {name!r} has {current} partitions; the new count must be larger, got {count}"
                )
            if validate_only:
                return
            streams = [await self.engine.create_stream() for _ in range(count - current)]
            await asyncio.to_thread(self.store.add_partitions, name, [s.stream_id for s in streams])
            for i, s in enumerate(streams):
                topic.partitions.append(self._partition_log(topic, current + i, s))
            rec = topic.record
            topic.record = TopicRecord(
                rec.name, rec.topic_id, count, rec.replication_factor, rec.configs
            )

    async def set_configs(
        self, name: str, overrides: Mapping[str, str], *, validate_only: bool = False
    ) -> None:
        """Replace a topic's overrides (AlterConfigs semantics)."""
        valid = self.configs.validate(overrides)
        async with self._lock:
            topic = self.topics.get(name)
            if topic is None:
                raise error_class(ErrorCode.unknown_topic_or_partition)(
                    f"topic {name!r} does not exist"
                )
            if validate_only:
                return
            await asyncio.to_thread(self.store.set_topic_configs, name, valid)
            rec = topic.record
            topic.record = TopicRecord(
                rec.name, rec.topic_id, rec.partitions, rec.replication_factor, valid
            )
            topic.config = self.configs.resolved(valid)
        for listener in self.listeners:
            listener.on_topic_config_changed(topic)

    async def enforce_retention(self) -> None:
        for topic in list(self.topics.values()):
            for p in topic.partitions:
                try:
                    await p.enforce_retention()
                except KafkaError:
                    log.exception("retention failed for %s-%d", topic.name, p.partition)
