"""One Tidelake broker: the Kafka listener over the partition logs.

Built by the process assembly (``api``) from explicit parts: its settings, a
metadata store and a stream engine. Nothing here reads the environment.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from typing import Any

from ingest.config import BrokerConfig
from ingest.log.manager import LogManager, TopicListener
from ingest.log.topic_config import TopicConfigRegistry
from ingest.metadata.api import MetadataStore
from ingest.s3stream.api import StreamEngine
from ingest.server.connection import KafkaConnection

__all__ = ["Broker", "TopicListener"]

log = logging.getLogger(__name__)


class Broker:
    def __init__(
        self,
        config: BrokerConfig,
        store: MetadataStore,
        engine: StreamEngine,
        topic_configs: TopicConfigRegistry | None = None,
    ) -> None:
        from ingest.group import GroupConfig, GroupCoordinator

        self.config = config
        self.store = store
        self.engine = engine
        self.logs = LogManager(store, engine, topic_configs or TopicConfigRegistry.default())
        self.groups = GroupCoordinator(
            store,
            GroupConfig(
                group_min_session_timeout_ms=config.group_min_session_timeout_ms,
                group_max_session_timeout_ms=config.group_max_session_timeout_ms,
                group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            ),
        )
        self.cluster_id = config.cluster_id or ""
        self.port = config.port
        self._server: asyncio.Server | None = None
        self._connections: set[KafkaConnection] = set()
        self._tasks: list[asyncio.Task[Any]] = []

    async def start(self) -> None:
        from ingest.server.dispatcher import Dispatcher

        await self.engine.start()
        if not self.cluster_id:
            stored = await asyncio.to_thread(self.store.get_kv, "cluster.id")
            if stored is None:
                stored = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
                await asyncio.to_thread(self.store.put_kv, "cluster.id", stored)
            self.cluster_id = stored
        await self.logs.load()
        await self.groups.start()
        dispatcher = Dispatcher(self)
        loop = asyncio.get_running_loop()

        def factory() -> KafkaConnection:
            conn = KafkaConnection(
                dispatcher, self.config.max_request_bytes, self._connections.discard
            )
            self._connections.add(conn)
            return conn

        self._server = await loop.create_server(
            factory, self.config.host, self.config.port, reuse_address=True
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        self._tasks.append(asyncio.create_task(self._retention_loop(), name="retention"))
        log.info(
            "Kafka listener on %s:%d (cluster %s)", self.config.host, self.port, self.cluster_id
        )

    def add_listener(self, listener: TopicListener) -> None:
        self.logs.listeners.append(listener)

    async def _retention_loop(self) -> None:
        interval = self.config.retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.logs.enforce_retention()
            except Exception:
                log.exception("retention pass failed")

    async def stop(self) -> None:
        """Stop accepting, close connections, then flush and close storage."""
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            conn.abort()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.groups.close()
        await self.engine.close()
        await asyncio.to_thread(self.store.close)
        log.info("broker stopped")
