"""The table topic service: follows topics (a ``TopicListener``) and runs one coordinator per enabled topic.

Wiring (process assembly)::

    register_table_topic_configs(broker.logs.configs, tt_settings)   # before broker.start()
    service = TableTopicService(settings=tt_settings, logs=broker.logs,
                                registry=registry_service_or_None, catalog=catalog)
    broker.add_listener(service)
    await broker.start(); await service.start()
    ...
    await service.stop(); await broker.stop()
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyiceberg.catalog import Catalog

from ingest.log.manager import LogManager, Topic, TopicListener
from table_topic.config import TableTopicConfig, register_table_topic_configs
from table_topic.convert.pool import ProcessConverter
from table_topic.coordinator import CoordinatorDeps, TopicCoordinator
from table_topic.decode.resolver import RegistryLike, SchemaResolver
from table_topic.delta.location import DeltaLocation
from table_topic.settings import TableTopicSettings
from table_topic.status import TopicStatus

__all__ = ["TableTopicService", "TableTopicSettings", "register_table_topic_configs"]

log = logging.getLogger(__name__)

# How often a broker of a cluster compares topic configs with its coordinators.
_CONFIG_CHECK_S = 2.0


class TableTopicService(TopicListener):
    def __init__(
        self,
        settings: TableTopicSettings,
        logs: LogManager,
        registry: RegistryLike | None,
        catalog: Catalog,
        throttle: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        """``throttle``, if given, is awaited with the bytes of each commit
        before it is written (the broker's table-write bandwidth share)."""
        self.settings = settings
        self.throttle = throttle
        self.logs = logs
        self.registry = registry
        self.catalog = catalog
        self._executor: ThreadPoolExecutor | None = None
        self._coordinators: dict[str, TopicCoordinator] = {}
        self._statuses: dict[str, TopicStatus] = {}
        self._lock: asyncio.Lock | None = None
        self._started = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._resolver = SchemaResolver(registry)
        self._converter: ProcessConverter | None = None

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        self._lock = asyncio.Lock()
        self._executor = ThreadPoolExecutor(
            self.settings.worker_threads, thread_name_prefix="table-topic"
        )
        self._started = True
        if not self.settings.enabled:
            log.info("table topics are disabled (TIDELAKE_TABLE_TOPIC_ENABLED=false)")
            return
        if self.settings.convert_processes > 0:
            # decode and convert on every core: per-record Python work does
            # not scale with threads (see table_topic.convert.pool)
            self._converter = ProcessConverter(
                self.settings.convert_processes, self.registry, self._executor
            )
            log.info(
                "table topics convert in %d worker processes", self.settings.convert_processes
            )
        for topic in list(self.logs.topics.values()):
            await self._reconcile(topic.name)
        if self.logs.lazy:
            watch = asyncio.get_running_loop().create_task(self._follow_configs())
            self._tasks.add(watch)
            watch.add_done_callback(self._tasks.discard)
        log.info("table topic service started (%d tables)", len(self._coordinators))

    async def stop(self) -> None:
        self._started = False
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for name in list(self._coordinators):
            await self._coordinators.pop(name).stop()
        if self._converter is not None:
            await asyncio.to_thread(self._converter.shutdown)
            self._converter = None
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=False)
            self._executor = None

    # ------------------------------------------------------------------ TopicListener
    def _schedule(self, name: str) -> None:
        if not self._started or not self.settings.enabled:
            return
        task = asyncio.get_running_loop().create_task(self._reconcile(name))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def on_topic_created(self, topic: Topic) -> None:
        self._schedule(topic.name)

    def on_topic_deleted(self, name: str) -> None:
        self._schedule(name)

    def on_topic_config_changed(self, topic: Topic) -> None:
        self._schedule(topic.name)

    async def _follow_configs(self) -> None:
        """A broker of a cluster learns another broker's AlterConfigs from a refreshed
        topic record, without a listener call: compare now and then."""
        while self._started:
            await asyncio.sleep(_CONFIG_CHECK_S)
            for topic in list(self.logs.topics.values()):
                try:
                    cfg = (
                        TableTopicConfig.from_topic_config(topic.name, topic.config)
                        if topic.config is not None
                        else None
                    )
                except (ValueError, KeyError):
                    cfg = None  # _reconcile logs why, once
                wanted = cfg is not None and cfg.enabled
                running = self._coordinators.get(topic.name)
                if wanted != (running is not None) or (
                    running is not None and (running.cfg != cfg or running.topic is not topic)
                ):
                    self._schedule(topic.name)

    # ------------------------------------------------------------------ reconcile
    def _config_of(self, topic: Topic) -> TableTopicConfig | None:
        if topic.config is None:
            return None
        try:
            return TableTopicConfig.from_topic_config(topic.name, topic.config)
        except (ValueError, KeyError) as exc:
            log.warning("topic %s: unusable table topic config: %s", topic.name, exc)
            return None

    async def _reconcile(self, name: str) -> None:
        """Start, restart or stop the topic's coordinator to match its current config."""
        assert self._lock is not None and self._executor is not None
        async with self._lock:
            topic = self.logs.get(name)
            cfg = self._config_of(topic) if topic is not None else None
            wanted = topic is not None and cfg is not None and cfg.enabled
            running = self._coordinators.get(name)
            if running is not None and wanted and running.cfg == cfg and running.topic is topic:
                return
            if running is not None:
                await running.stop()
                del self._coordinators[name]
            if not wanted:
                if name in self._statuses:
                    self._statuses[name].state = "stopped" if topic is not None else "deleted"
                return
            assert topic is not None and cfg is not None
            status = self._statuses.get(name)
            if status is None or status.table != ".".join(cfg.identifier()):
                status = TopicStatus(name, ".".join(cfg.identifier()))
                self._statuses[name] = status
            status.format = cfg.format.value
            deps = CoordinatorDeps(
                self.settings,
                self.logs,
                self.catalog,
                self._resolver,
                self._executor,
                self._converter,
                self.throttle,
                self._delta_location(),
            )
            coordinator = TopicCoordinator(topic, cfg, deps, status)
            self._coordinators[name] = coordinator
            coordinator.start()
            log.info("table topic %s -> %s", name, ".".join(cfg.identifier()))

    def _delta_location(self) -> DeltaLocation | None:
        props = {k: str(v) for k, v in getattr(self.catalog, "properties", {}).items()}
        return DeltaLocation.resolve(
            self.settings.delta_location, self.settings.delta_storage_options, props
        )

    # ------------------------------------------------------------------ status
    def status(self) -> list[dict[str, Any]]:
        """One plain dict per table topic (see TopicStatus.to_dict)."""
        out = []
        for name, st in sorted(self._statuses.items()):
            topic = self.logs.get(name)
            hws = (
                # a table reads committed data only: its lag ends at the LSO
                {p.partition: p.last_stable_offset for p in topic.partitions}
                if topic is not None
                else {}
            )
            d = st.to_dict(hws)
            d["enabled"] = name in self._coordinators
            out.append(d)
        return out
