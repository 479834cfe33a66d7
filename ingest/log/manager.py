"""Topics and their partition logs.

The metadata store is the source of truth; this manager keeps an in-memory
view for the request path (no store round trip to produce or fetch) and
serialises topic changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Mapping
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
_TXN_CHECKPOINT_PROGRESS = 5_000  # offsets; half the producer-state window a reopen scans anyway


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
    """A topic and the logs of its partitions that this broker serves: all of
    them on a single broker; in a cluster, those it leads."""

    record: TopicRecord
    logs: dict[int, PartitionLog] = field(default_factory=dict)
    config: TopicConfig | None = None
    stream_ids: list[int] = field(default_factory=list)  # of every partition, by index

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def partition_count(self) -> int:
        return len(self.stream_ids)

    @property
    def partitions(self) -> list[PartitionLog]:
        """The partition logs served here, by partition index."""
        return [self.logs[i] for i in sorted(self.logs)]

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


Placement = Callable[[str, int, int], Awaitable[None]]
"""(topic, first partition, count): give new partitions a leader (a cluster)."""


class LogManager:
    """Topics and the partition logs this broker serves.

    ``lazy`` (a broker of a cluster): topics are known from the metadata
    store, but a partition's log is opened only by :meth:`open_partition`,
    when the cluster makes this broker its leader, and closed again by
    :meth:`close_partition`; ``placement`` is called for the partitions of
    every new topic so the cluster gives them leaders.
    """

    def __init__(
        self,
        store: MetadataStore,
        engine: StreamEngine,
        configs: TopicConfigRegistry,
        *,
        lazy: bool = False,
        placement: Placement | None = None,
        removal: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.store = store
        self.engine = engine
        self.configs = configs
        self.lazy = lazy
        self.placement = placement
        self.removal = removal
        self._moving: dict[tuple[str, int], asyncio.Event] = {}
        self.topics: dict[str, Topic] = {}
        self.topics_by_id: dict[uuid.UUID, Topic] = {}
        self._lock = asyncio.Lock()
        self.listeners: list[TopicListener] = []

    async def load(self) -> None:
        """Load every topic in the metadata store (and open its partitions,
        unless ``lazy``)."""
        records = await asyncio.to_thread(self.store.list_topics)
        for rec in records:
            topic = await self._load_topic(rec)
            if not self.lazy:
                for i, sid in enumerate(topic.stream_ids):
                    stream = await self.engine.open_stream(sid)
                    topic.logs[i] = self._partition_log(topic, i, stream)
            self._register(topic)
        for topic in self.topics.values():
            for plog in topic.partitions:
                await self._rebuild(plog)
        log.info("loaded %d topics", len(records))

    async def _load_topic(self, rec: TopicRecord) -> Topic:
        parts = await asyncio.to_thread(self.store.list_partitions, rec.name)
        topic = Topic(rec, config=self.configs.resolved(rec.configs))
        topic.stream_ids = [p.stream_id for p in sorted(parts, key=lambda p: p.partition)]
        return topic

    @staticmethod
    async def _rebuild(plog: PartitionLog) -> None:
        try:
            await plog.rebuild_producer_state()
        except Exception:
            log.exception("cannot rebuild producer state of %s-%d", plog.topic, plog.partition)

    async def refresh(self) -> None:
        """Follow topics that other brokers created, deleted, resized or
        reconfigured (a cluster)."""
        records = {r.name: r for r in await asyncio.to_thread(self.store.list_topics)}
        gone: list[Topic] = []
        created: list[Topic] = []
        changed: list[Topic] = []
        async with self._lock:
            for name, old in list(self.topics.items()):
                rec = records.get(name)
                if rec is None or rec.topic_id != old.record.topic_id:
                    del self.topics[name]
                    self.topics_by_id.pop(old.topic_id, None)
                    gone.append(old)
            for name, rec in records.items():
                known = self.topics.get(name)
                if known is None:
                    topic = await self._load_topic(rec)
                    self._register(topic)
                    created.append(topic)
                elif known.record != rec:
                    fresh = await self._load_topic(rec)
                    configs_changed = known.record.configs != rec.configs
                    known.record, known.stream_ids = rec, fresh.stream_ids
                    known.config = self.configs.resolved(rec.configs)
                    if configs_changed:
                        changed.append(known)
        for topic in gone:
            for index in list(topic.logs):
                await self._close_log(topic, index)
            for listener in self.listeners:
                listener.on_topic_deleted(topic.name)
        for topic in created:
            for listener in self.listeners:
                listener.on_topic_created(topic)
        for topic in changed:
            for listener in self.listeners:
                listener.on_topic_config_changed(topic)

    async def open_partition(self, name: str, index: int, leader_epoch: int) -> PartitionLog:
        """Serve a partition here (this broker became its leader): take its
        stream over from whichever broker wrote it last."""
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < topic.partition_count:
            await self.refresh()
            topic = self.topics.get(name)
            if topic is None or not 0 <= index < topic.partition_count:
                raise error_class(ErrorCode.unknown_topic_or_partition)(f"{name}-{index}")
        current = topic.logs.get(index)
        if current is not None:
            current.leader_epoch = leader_epoch
            return current
        self.begin_move(name, index)
        try:
            acquire = getattr(self.engine, "acquire_stream", None)
            sid = topic.stream_ids[index]
            stream = await (acquire(sid) if acquire is not None else self.engine.open_stream(sid))
            plog = self._partition_log(topic, index, stream, leader_epoch)
            await self._rebuild(plog)
            topic.logs[index] = plog
            return plog
        finally:
            self.end_move(name, index)

    async def close_partition(self, name: str, index: int) -> None:
        """Stop serving a partition here and flush its stream to object storage."""
        topic = self.topics.get(name)
        if topic is not None:
            await self._close_log(topic, index)

    async def _close_log(self, topic: Topic, index: int) -> None:
        plog = topic.logs.pop(index, None)
        if plog is None:
            return
        plog._wake_readers()
        release = getattr(self.engine, "release_stream", None)
        if release is not None:
            try:
                await release(plog.stream.stream_id)
            except Exception:  # noqa: BLE001 - a deleted stream has nothing to keep
                log.warning("releasing %s-%d failed", topic.name, index, exc_info=True)

    # --- partitions moving between brokers (a cluster) ------------------------------
    def begin_move(self, name: str, index: int) -> None:
        """The partition is being opened here or handed away: requests for it
        wait (:meth:`settle`) instead of failing with NOT_LEADER_OR_FOLLOWER, so
        a client sees one retriable error per move at most."""
        self._moving.setdefault((name, index), asyncio.Event())

    def end_move(self, name: str, index: int) -> None:
        done = self._moving.pop((name, index), None)
        if done is not None:
            done.set()

    def moving(self, name: str, index: int) -> bool:
        return (name, index) in self._moving

    async def settle(self, name: str, index: int, wait_s: float) -> None:
        """Wait up to ``wait_s`` s while the partition moves here or away."""
        done = self._moving.get((name, index))
        if done is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), wait_s)

    def has_partition(self, name: str, index: int) -> bool:
        """The partition exists (served here or by another broker of the cluster)."""
        topic = self.topics.get(name)
        return topic is not None and 0 <= index < topic.partition_count

    def partition_error(self, name: str, index: int) -> ErrorCode:
        """Why :meth:`partition` found nothing: the partition does not exist,
        or another broker leads it."""
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < topic.partition_count:
            return ErrorCode.unknown_topic_or_partition
        return ErrorCode.not_leader_or_follower

    def _partition_log(
        self, topic: Topic, index: int, stream: object, epoch: int = 0
    ) -> PartitionLog:
        def config() -> TopicConfig:
            assert topic.config is not None
            return topic.config

        return PartitionLog(
            topic.name,
            index,
            stream,  # type: ignore[arg-type]
            config,
            epoch,
            txn_store=self.store,
        )

    def _register(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.topics_by_id[topic.topic_id] = topic

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def partition(self, name: str, index: int) -> PartitionLog | None:
        """The partition's log, if this broker serves it."""
        topic = self.topics.get(name)
        if topic is None:
            return None
        return topic.logs.get(index)

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
            topic.stream_ids = [s.stream_id for s in streams]
            if not self.lazy:
                topic.logs = {i: self._partition_log(topic, i, s) for i, s in enumerate(streams)}
            self._register(topic)
        if self.placement is not None:
            await self.placement(name, 0, partitions)
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
        if self.removal is not None:
            await self.removal(name)
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
            current = topic.partition_count
            if count <= current:
                raise error_class(ErrorCode.invalid_partitions)(
                    f"topic {name!r} has {current} partitions; the new count must be larger, got {count}"
                )
            if validate_only:
                return
            streams = [await self.engine.create_stream() for _ in range(count - current)]
            await asyncio.to_thread(self.store.add_partitions, name, [s.stream_id for s in streams])
            topic.stream_ids.extend(s.stream_id for s in streams)
            if not self.lazy:
                for i, s in enumerate(streams):
                    topic.logs[current + i] = self._partition_log(topic, current + i, s)
            rec = topic.record
            topic.record = TopicRecord(
                rec.name, rec.topic_id, count, rec.replication_factor, rec.configs
            )
        if self.placement is not None:
            await self.placement(name, current, count - current)

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
                # one partition at a time between the event loop's other work:
                # a pass over every partition must not hold up the requests
                await asyncio.sleep(0)
                try:
                    await p.enforce_retention()
                except KafkaError:
                    log.exception("retention failed for %s-%d", topic.name, p.partition)
                try:  # bounds the log a reopen replays when no marker was written for long
                    await p.save_txn_checkpoint(min_progress=_TXN_CHECKPOINT_PROGRESS)
                except Exception:  # noqa: BLE001 - the next pass tries again
                    log.warning("transaction checkpoint of %s-%d failed", topic.name, p.partition)
