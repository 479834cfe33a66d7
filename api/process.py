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
import socket
from collections.abc import Awaitable, Callable, Generator
from contextlib import suppress
from typing import Any

import uvicorn

from api.cluster import (
    cluster_setup,
    is_clustered,
    node_storage,
    open_cluster_catalog,
    shared_services,
)
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


def bind_listener(listen: str) -> socket.socket:
    """A TCP socket bound to ``listen`` (HOST:PORT), for an HTTP server;
    raises OSError when the address is taken or not this host's."""
    host, port = parse_hostport(listen)
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {listen}: {exc.strerror}") from None
    return sock


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
        self.metrics: Any = None  # api.metrics.PlatformMetrics
        self._otlp: Any = None  # api.metrics.otlp.OtlpPusher when [metrics] otlp_endpoint is set
        # the schema store: one for the registry, the console and table
        # topics (each would otherwise hold a PostgreSQL pool of its own)
        self._schema_store: Any = None
        self._servers: list[uvicorn.Server] = []
        self._server_tasks: list[asyncio.Task[Any]] = []

    async def start(self) -> None:
        s = self.settings
        s.data_dir.mkdir(parents=True, exist_ok=True)
        store = await asyncio.to_thread(open_metadata_store, s.metadata_url)
        objects = open_object_store(s.object_store_url, **s.object_store_options())
        clustered = is_clustered(s)
        storage = node_storage(s, s.broker.node_id) if clustered else s.storage
        engine = open_engine(storage, store, objects)
        setup = await asyncio.to_thread(cluster_setup, s, store, objects) if clustered else None
        self.broker = Broker(s.broker, store, engine, cluster=setup)
        if clustered:
            log.info("cluster mode: %s", shared_services(s))
            self.catalog = await asyncio.to_thread(open_cluster_catalog, s)
        # In a cluster every broker converts the partitions it leads into the
        # shared catalog's table (table_topic/commit.py: per-partition merge).
        await self._prepare_table_topics(self.broker)
        from api.metrics import PlatformMetrics

        status = self.table_topics.status if self.table_topics is not None else None
        self.metrics = PlatformMetrics(self.broker, status)  # before start: observes requests
        await self.broker.start()
        self.metrics.loop_lag.start()
        if self.table_topics is not None:
            await self.table_topics.start()
        await self._start_http()
        if s.metrics.otlp_endpoint:
            self._otlp = self.metrics.otlp_pusher(
                s.metrics.otlp_endpoint, s.metrics.otlp_interval_s
            )
            self._otlp.start()

    async def _schemas(self) -> Any:
        """The process's schema store, opened on first use."""
        if self._schema_store is None:
            from schema_registry.store import open_store

            self._schema_store = await asyncio.to_thread(
                open_store, self.settings.registry.store_url
            )
        return self._schema_store

    # --- table topics (table_topic room) -------------------------------------
    async def _prepare_table_topics(self, broker: Broker) -> None:
        """Register the table.topic.* configs and follow topics into Iceberg tables."""
        from catalog.factory import load_platform_catalog
        from schema_registry.service import RegistryService
        from table_topic.service import (
            TableTopicService,
            register_table_topic_configs,
        )

        settings = self.settings.table_topic
        register_table_topic_configs(broker.logs.configs, settings)
        # One catalog instance for table topics and the HTTP API.
        if self.catalog is None:
            self.catalog = await asyncio.to_thread(load_platform_catalog, self.settings.catalog)
        if not settings.enabled:
            return
        registry = RegistryService(await self._schemas())
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
        from schema_registry.service import RegistryService

        status = self.table_topics.status if self.table_topics is not None else None
        console_registry = RegistryService(await self._schemas())
        http_app = create_http_app(
            s.catalog,
            self.catalog,
            self.broker,
            table_status=status,
            metrics=self.metrics,
            registry=console_registry,
            metrics_settings=s.metrics,
            http_settings=s.http,
            credentials=self.broker.credentials,
        )
        # the registry also takes the catalog's OAuth2 tokens as bearer tokens
        registry_app = create_registry_app(
            s.registry,
            store=await self._schemas(),
            credentials=self.broker.credentials,
            token_verifier=http_app.state.rest_auth.client_of_token,
        )
        registry_app.add_middleware(self.metrics.http.middleware(lambda _path: "registry"))
        for app, listen, (certfile, keyfile) in (
            (
                registry_app,
                s.process.registry_listen,
                (s.registry.ssl_certfile, s.registry.ssl_keyfile),
            ),
            (http_app, s.process.http_listen, (s.http.ssl_certfile, s.http.ssl_keyfile)),
        ):
            host, port = parse_hostport(listen)
            config = uvicorn.Config(
                app,
                host=host,
                port=port,
                log_level="warning",
                lifespan="on",
                access_log=False,
                ssl_certfile=certfile,
                ssl_keyfile=keyfile,
            )
            # bound here, not by uvicorn: a port taken since `serve` checked it
            # is an OSError the command prints as one line (uvicorn would log
            # it and exit the process from inside its task)
            sock = bind_listener(listen)
            quiet = _QuietServer(config)
            self._servers.append(quiet)
            self._server_tasks.append(asyncio.create_task(quiet.serve(sockets=[sock])))
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
        if self._otlp is not None:
            await self._otlp.stop()
        if self.metrics is not None:
            await self.metrics.loop_lag.stop()
        for server in self._servers:
            server.should_exit = True
        # The Kafka listener stops taking requests at once and answers those in
        # flight while the HTTP servers stop. (A broker of a cluster first hands
        # its partitions over, still serving: Broker.stop does both in order.)
        kafka: asyncio.Task[None] | None = None
        if self.broker is not None and self.broker.member is None:
            kafka = asyncio.create_task(self.broker.drain_connections())
        with suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*self._server_tasks, return_exceptions=True), 10)
        if kafka is not None:
            await kafka
        if self.table_topics is not None:
            await self.table_topics.stop()
        if self.broker is not None:
            await self.broker.stop()
        if self._schema_store is not None:
            self._schema_store.close()


async def _main(settings: Settings) -> None:
    platform = Platform(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await platform.start()
    # a storage engine that cannot go on stops the process, non-zero, so that
    # a supervisor restarts it (start-up recovery replays the WAL)
    fatal: list[BaseException] = []

    def on_fatal(error: BaseException) -> None:
        fatal.append(error)
        stop.set()

    if platform.broker is not None and hasattr(platform.broker.engine, "on_fatal"):
        platform.broker.engine.on_fatal = on_fatal
    tune_for_latency()
    print(
        # with named listeners, kafka_listen is not used: name what is listening
        f"tidelake ready: kafka={','.join(settings.broker.listeners) or settings.process.kafka_listen} "
        f"registry={settings.process.registry_listen} "
        f"http={settings.process.http_listen} data={settings.data_dir}",
        flush=True,
    )
    try:
        await stop.wait()
    finally:
        log.info("shutting down")
        await platform.stop()
    if fatal:
        log.critical("stopped after a storage failure: %s", fatal[0])
        raise SystemExit(70)


def run(settings: Settings) -> None:
    import os

    if not os.environ.get("PYTHONASYNCIODEBUG"):  # asyncio's debug mode needs the stock loop
        try:
            import uvloop

            uvloop.install()
        except ImportError:  # pragma: no cover - uvloop is optional
            pass
    asyncio.run(_main(settings))
