"""Process assembly: build every part from settings and run them in one loop.

``tidelake serve`` runs, in one asyncio loop: the Kafka broker (with its
S3Stream engine and metadata store), the schema registry on its own listener,
and the HTTP API (Iceberg REST catalog, browsing API, web page) on another.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Generator
from contextlib import suppress
from typing import Any

import uvicorn

from api.settings import Settings
from ingest.broker import Broker
from ingest.config import parse_hostport
from ingest.metadata import open_metadata_store
from ingest.runtime import tune_for_latency
from ingest.s3stream.factory import open_engine
from ingest.s3stream.objectstore.factory import open_object_store

__all__ = ["Platform", "run"]

log = logging.getLogger("tidelake")


def _table_write_throttle(broker: Broker) -> Callable[[int], Awaitable[None]] | None:
    """Table topic commits take the table-write share of the stream engine's
    network rate limiter, when the engine has one and it is on."""
    from ingest.s3stream.network.limiter import TrafficClass

    limiter = getattr(broker.engine, "rate_limiter", None)
    if limiter is None or not limiter.limits(TrafficClass.TABLE_WRITE):
        return None

    async def throttle(nbytes: int) -> None:
        await limiter.acquire(TrafficClass.TABLE_WRITE, nbytes)

    return throttle


class _QuietServer(uvicorn.Server):
    """A uvicorn server that leaves signals to the platform: SIGTERM stops
    every part in order (HTTP, table topics, broker), not one server."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class Platform:
    """Every long-running part of one Tidelake process."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.broker: Broker | None = None
        self.table_topics: Any = None  # table_topic.service.TableTopicService
        self.catalog: Any = None  # the platform's pyiceberg Catalog
        self._servers: list[uvicorn.Server] = []
        self._server_tasks: list[asyncio.Task[Any]] = []

    async def start(self) -> None:
        s = self.settings
        s.data_dir.mkdir(parents=True, exist_ok=True)
        store = await asyncio.to_thread(open_metadata_store, s.metadata_url)
        objects = open_object_store(s.object_store_url, **s.object_store_options())
        engine = open_engine(s.storage, store, objects)
        self.broker = Broker(s.broker, store, engine)
        await self._prepare_table_topics(self.broker)
        await self.broker.start()
        if self.table_topics is not None:
            await self.table_topics.start()
        await self._start_http()

    # --- table topics (table_topic room) -------------------------------------
    async def _prepare_table_topics(self, broker: Broker) -> None:
        """Register the table.topic.* configs and follow topics into Iceberg tables."""
        from catalog.factory import load_platform_catalog
        from schema_registry.service import RegistryService
        from schema_registry.store import open_store
        from table_topic.service import (
            TableTopicService,
            register_table_topic_configs,
        )

        settings = self.settings.table_topic
        register_table_topic_configs(broker.logs.configs, settings)
        # One catalog instance for table topics and the HTTP API.
        self.catalog = await asyncio.to_thread(load_platform_catalog, self.settings.catalog)
        if not settings.enabled:
            return
        registry = RegistryService(
            await asyncio.to_thread(open_store, self.settings.registry.store_url)
        )
        self.table_topics = TableTopicService(
            settings=settings,
            logs=broker.logs,
            registry=registry,
            catalog=self.catalog,
            throttle=_table_write_throttle(broker),
        )
        broker.add_listener(self.table_topics)

    async def _start_http(self) -> None:
        from api.http import create_http_app
        from schema_registry.app import create_app as create_registry_app

        s = self.settings
        assert self.broker is not None
        registry_app = create_registry_app(s.registry)
        status = self.table_topics.status if self.table_topics is not None else None
        http_app = create_http_app(s.catalog, self.catalog, self.broker, table_status=status)
        for app, listen in (
            (registry_app, s.process.registry_listen),
            (http_app, s.process.http_listen),
        ):
            host, port = parse_hostport(listen)
            config = uvicorn.Config(
                app, host=host, port=port, log_level="warning", lifespan="on", access_log=False
            )
            quiet = _QuietServer(config)
            self._servers.append(quiet)
            self._server_tasks.append(asyncio.create_task(quiet.serve()))
        for server, task in zip(self._servers, self._server_tasks, strict=True):
            while not server.started:
                if task.done():
                    task.result()  # raises the bind error
                    raise RuntimeError("HTTP server exited during start-up")
                await asyncio.sleep(0.02)
        log.info(
            "schema registry on %s, HTTP API on %s",
            s.process.registry_listen,
            s.process.http_listen,
        )

    async def stop(self) -> None:
        for server in self._servers:
            server.should_exit = True
        with suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*self._server_tasks, return_exceptions=True), 10)
        if self.table_topics is not None:
            await self.table_topics.stop()
        if self.broker is not None:
            await self.broker.stop()


async def _main(settings: Settings) -> None:
    platform = Platform(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await platform.start()
    tune_for_latency()
    print(
        f"tidelake ready: kafka={settings.process.kafka_listen} registry={settings.process.registry_listen} "
        f"http={settings.process.http_listen} data={settings.data_dir}",
        flush=True,
    )
    try:
        await stop.wait()
    finally:
        log.info("shutting down")
        await platform.stop()


def run(settings: Settings) -> None:
    import os

    if not os.environ.get("PYTHONASYNCIODEBUG"):  # asyncio's debug mode needs the stock loop
        try:
            import uvloop

            uvloop.install()
        except ImportError:  # pragma: no cover - uvloop is optional
            pass
    asyncio.run(_main(settings))
