"""One Tidelake broker: the Kafka listener over the partition logs.

Built by the process assembly (``api``) from explicit parts: its settings, a
metadata store and a stream engine. Nothing here reads the environment.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import ssl
import uuid
from collections.abc import Callable
from typing import Any, cast

from ingest.cluster.api import ListenerEndpoint
from ingest.cluster.hooks import BrokerLeadership, ClusterSetup
from ingest.cluster.member import ClusterMember
from ingest.cluster.peer_connection import PeerSecurity
from ingest.cluster.racks import RackTraffic
from ingest.cluster.view import (
    BrokerEndpoint,
    ClusterView,
    SingleBrokerView,
    inter_broker_listener,
)
from ingest.config import BrokerConfig
from ingest.log.compaction import LogCleaner
from ingest.log.manager import LogManager, TopicListener
from ingest.log.topic_config import TopicConfigRegistry
from ingest.metadata.api import MetadataStore
from ingest.replica import ReplicaReader
from ingest.s3stream.api import StreamEngine
from ingest.security.acl import AclStore, Authorizer, MetadataAclStore
from ingest.security.advertised import ListenerBroker, ListenerView
from ingest.security.credentials import CredentialStore, MetadataCredentialStore
from ingest.security.listeners import Listener, parse_listeners
from ingest.security.quota import MetadataQuotaStore
from ingest.security.quota_manager import QuotaManager
from ingest.security.sasl import SecuritySession
from ingest.security.settings import make_authenticator
from ingest.security.tls import server_context
from ingest.server.connection import Dispatch, KafkaConnection, RequestMemory, close_expired
from ingest.txn import MetadataTxnStore, TransactionCoordinator, TxnConfig
from ingest.txn.adapters import GroupOffsetSink, LogMarkerWriter
from ingest.txn.peer import ClusterMarkerWriter
from ingest.zone_router import close_router

__all__ = ["Broker", "TopicListener"]

log = logging.getLogger(__name__)


class Broker:
    def __init__(
        self,
        config: BrokerConfig,
        store: MetadataStore,
        engine: StreamEngine,
        topic_configs: TopicConfigRegistry | None = None,
        cluster: ClusterSetup | None = None,
        on_fatal: Callable[[str], None] | None = None,
    ) -> None:
        from ingest.group import GroupConfig, GroupCoordinator
        from ingest.group.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
        from ingest.group.types import MigrationPolicy

        self.config = config
        self.store = store
        self.engine = engine
        self.logs = LogManager(
            store,
            engine,
            topic_configs or TopicConfigRegistry.default(),
            lazy=cluster is not None,
        )
        self.replica_reader = ReplicaReader(engine, self.logs)  # partitions led elsewhere
        self.rack_traffic = RackTraffic()
        self.cleaner = LogCleaner(
            lambda: [
                (p, t.config) for t in self.logs.topics.values() if t.config for p in t.partitions
            ],
            store,
            interval_ms=config.log_cleaner_backoff_ms,
            max_map_bytes=config.log_cleaner_dedupe_buffer_size,
            max_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
        )
        self._cluster_setup = cluster
        self._on_fatal = on_fatal or _exit_now
        self.member: ClusterMember | None = None
        self.cluster: ClusterView = SingleBrokerView(
            BrokerEndpoint(config.node_id, config.public_host, config.public_port)
        )
        self.groups = GroupCoordinator(
            store,
            GroupConfig(
                group_min_session_timeout_ms=config.group_min_session_timeout_ms,
                group_max_session_timeout_ms=config.group_max_session_timeout_ms,
                group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            ),
        )
        self.consumer_groups = ConsumerGroupCoordinator(
            lambda: {name: t.partition_count for name, t in self.logs.topics.items()},
            ConsumerGroupConfig(
                session_timeout_ms=config.group_consumer_session_timeout_ms,
                heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
                migration_policy=MigrationPolicy(config.group_consumer_migration_policy),
            ),
        )
        self.groups.attach(self.consumer_groups)  # online migration (KIP-848)
        # listeners (the first is the default one) and their security
        self.listeners: list[Listener] = parse_listeners(
            config.listeners,
            config.advertised_listeners,
            config.listener_security_protocol_map,
            default_host=config.host,
            default_port=config.port,
            advertised_host=config.advertised_host,
            advertised_port=config.advertised_port,
        )
        # where the other brokers of a cluster are called, and how: a cluster
        # broker refuses to start when that listener needs TLS or SASL and
        # the inter_broker_* settings it needs are missing
        self.inter_broker_listener = inter_broker_listener(
            [(x.name, x.protocol.value) for x in self.listeners],
            config.inter_broker_listener_name,
        )
        self.peer_security = PeerSecurity()
        if cluster is not None:
            inter = next(x for x in self.listeners if x.name == self.inter_broker_listener)
            client_auth = {k.upper(): v for k, v in config.listener_ssl_client_auth.items()}.get(
                inter.name, config.ssl_client_auth
            )
            self.peer_security = PeerSecurity.from_settings(config, inter.protocol, client_auth)
        self.txns = TransactionCoordinator(
            MetadataTxnStore(store),
            ClusterMarkerWriter(
                self.logs,
                lambda: self.cluster,
                listener=self.inter_broker_listener,
                security=self.peer_security,
            )
            if cluster is not None
            else LogMarkerWriter(self.logs),
            GroupOffsetSink(self.groups),
            store.allocate_producer_id,
            TxnConfig(
                max_timeout_ms=config.transaction_max_timeout_ms,
                # prepared transactions' markers are retried on this beat too
                sweep_interval_s=min(1.0, config.transaction_abort_interval_ms / 1000),
                abort_interval_s=config.transaction_abort_interval_ms / 1000,
                reread=cluster is not None,  # the cluster's brokers share the records
            ),
            owns=self._coordinates,
        )
        self.groups.unstable = self.txns.pending_offsets
        self.cluster_id = config.cluster_id or ""
        self.port = config.port
        self._server: asyncio.Server | None = None
        self._connections: set[KafkaConnection] = set()
        self._tasks: list[asyncio.Task[Any]] = []
        self._stopping: asyncio.Future[None] | None = None
        self.request_memory = RequestMemory(config.max_buffered_request_bytes)
        self._ssl: dict[str, ssl.SSLContext] = {}  # listener name -> its TLS context
        per_listener = {k.upper(): v for k, v in config.listener_ssl_client_auth.items()}
        for listener in self.listeners:
            if listener.protocol.uses_tls:
                client_auth = per_listener.get(listener.name, config.ssl_client_auth)
                self._ssl[listener.name] = server_context(
                    config.ssl_certfile, config.ssl_keyfile, config.ssl_cafile, client_auth
                )
        self.credentials: CredentialStore = MetadataCredentialStore(store)
        self.authenticator = make_authenticator(self.credentials, config)
        self.acls: AclStore = MetadataAclStore(store)
        self.authorizer: Authorizer | None = (
            Authorizer(
                self.acls,
                config.super_users,
                allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
                refresh_interval_s=config.acl_refresh_interval_ms / 1000,
            )
            if config.authorizer == "acl"
            else None
        )
        self.quotas = QuotaManager(
            MetadataQuotaStore(store),
            window_s=config.quota_window_size_ms / 1000,
            samples=config.quota_window_num,
            refresh_interval_s=config.acl_refresh_interval_ms / 1000,
        )
        self.bound_ports: dict[str, int] = {}  # listener name -> the port it bound
        # told of every answered request (metrics); set before start()
        self.request_observer: Callable[[int, float, Any, Any], None] | None = None
        self._extra_servers: list[asyncio.Server] = []

    def _coordinates(self, key: str) -> bool:
        """This broker coordinates the group or transactional id ``key``."""
        view = self.cluster
        return not view.clustered or view.coordinator_for(key).node_id == view.node_id

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
        await self.consumer_groups.start()
        await self.txns.start()
        if self.authorizer is not None:
            await asyncio.to_thread(self.authorizer.refresh)
            self._tasks.append(asyncio.create_task(self.authorizer.run(), name="acl-refresh"))
        await asyncio.to_thread(self.quotas.refresh)
        self._tasks.append(asyncio.create_task(self.quotas.run(), name="quota-refresh"))
        for index, listener in enumerate(self.listeners):
            # the default listener's handlers see the broker itself
            seen_as = self if index == 0 else cast(Broker, self._as_seen_on(listener))
            server = await self._listen(listener, Dispatcher(seen_as))
            if index == 0:
                self._server = server
                self.port = self.bound_ports[listener.name]
            else:
                self._extra_servers.append(server)
        endpoint = BrokerEndpoint(self.config.node_id, self.advertised_host, self.advertised_port)
        self.cluster = SingleBrokerView(endpoint)
        if self._cluster_setup is not None:
            await self._join_cluster(self._cluster_setup, endpoint)
        self._tasks.append(asyncio.create_task(self._retention_loop(), name="retention"))
        if self.config.log_cleaner_enable:
            self._tasks.append(asyncio.create_task(self.cleaner.run(), name="log-cleaner"))
        self._tasks.append(asyncio.create_task(self._connection_reaper(), name="reaper"))
        for listener in self.listeners:
            log.info(
                "Kafka listener %s on %s:%d (cluster %s)",
                listener.name,
                listener.host,
                self.bound_ports[listener.name],
                self.cluster_id,
            )

    async def _listen(self, listener: Listener, dispatcher: Dispatch) -> asyncio.Server:
        def factory() -> KafkaConnection:
            return KafkaConnection(
                dispatcher,
                self.config.max_request_bytes,
                self._connections.discard,
                self.request_memory,
                SecuritySession(
                    listener, self.config.connection_failed_authentication_delay_ms / 1000
                ),
                on_open=self._connections.add,
            )

        server = await asyncio.get_running_loop().create_server(
            factory,
            listener.host or None,
            listener.port,
            reuse_address=True,
            ssl=self._ssl.get(listener.name),
        )
        self.bound_ports[listener.name] = server.sockets[0].getsockname()[1]
        return server

    def _as_seen_on(self, listener: Listener) -> ListenerBroker:
        """This broker as the handlers of a non-default listener see it: its
        own address in responses is that listener's advertised one."""
        view = ListenerView(
            lambda: self.cluster,
            listener.advertised_host or listener.host or self.config.public_host,
            lambda: listener.advertised_port or self.bound_ports[listener.name],
        )
        return ListenerBroker(self, view)

    def advertised_listeners(self) -> list[ListenerEndpoint]:
        """Every listener at the address clients are told (call once bound):
        what this broker registers in a cluster, the default one first."""
        out = [
            ListenerEndpoint(
                self.listeners[0].name,
                self.advertised_host,
                self.advertised_port,
                self.listeners[0].protocol.value,
            )
        ]
        for listener in self.listeners[1:]:
            out.append(
                ListenerEndpoint(
                    listener.name,
                    listener.advertised_host or listener.host or self.config.public_host,
                    listener.advertised_port or self.bound_ports[listener.name],
                    listener.protocol.value,
                )
            )
        return out

    async def _join_cluster(self, setup: ClusterSetup, endpoint: BrokerEndpoint) -> None:
        member = ClusterMember(
            setup.store,
            setup.config,
            node_id=endpoint.node_id,
            host=endpoint.host,
            port=endpoint.port,
            rack=setup.rack,
            object_prefix=setup.object_prefix,
            hooks=BrokerLeadership(self.logs, setup.recover, self._on_fatal),
            listeners=self.advertised_listeners(),
        )
        self.logs.placement = member.place
        self.logs.removal = member.remove
        await member.start()
        self.member = member
        self.cluster = member

    @property
    def stopping(self) -> asyncio.Future[None]:
        """Resolved when the broker starts to shut down: waits (long-polling
        Fetch) end early and answer with what they have."""
        if self._stopping is None:
            self._stopping = asyncio.get_running_loop().create_future()
        return self._stopping

    @property
    def advertised_host(self) -> str:
        """The host clients are told to connect to (Metadata, FindCoordinator...)."""
        default = self.listeners[0]
        if default.advertised_host:
            return default.advertised_host
        return default.host if self.config.listeners and default.host else self.config.public_host

    @property
    def advertised_port(self) -> int:
        """The port clients are told to connect to: ``advertised_port``, else
        the port the listener bound (which may have been chosen by the OS)."""
        return self.listeners[0].advertised_port or self.port

    async def refresh_view(self, wait_s: float) -> None:
        """In a cluster, bring the leaders and brokers this broker names up to
        the shared store before answering (waiting up to ``wait_s`` s)."""
        if self.member is not None:
            await self.member.refresh_view(wait_s)

    async def await_partition(self, topic: str, partition: int, wait_s: float) -> None:
        """Before answering NOT_LEADER_OR_FOLLOWER for a partition that exists:
        wait (up to ``wait_s`` s) while it moves to or from this broker, and
        catch up with the cluster once, in case this broker was just made its
        leader. A client then sees at most one retriable error per move."""
        logs = self.logs
        if logs.partition(topic, partition) is not None or not logs.has_partition(topic, partition):
            return
        deadline = asyncio.get_running_loop().time() + wait_s
        await logs.settle(topic, partition, wait_s)
        if logs.partition(topic, partition) is None and self.member is not None:
            left = deadline - asyncio.get_running_loop().time()
            if left > 0:
                await self.member.catch_up(left)
                await logs.settle(topic, partition, deadline - asyncio.get_running_loop().time())

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

    async def _connection_reaper(self) -> None:
        """Close idle connections and requests that do not finish arriving."""
        idle_s = self.config.connections_max_idle_ms / 1000
        read_s = self.config.request_read_timeout_ms / 1000
        limits = [t for t in (idle_s, read_s) if t > 0]
        if not limits:
            return
        interval = min(1.0, max(0.01, min(limits) / 4))
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            close_expired(self._connections, loop.time(), idle_s, read_s)

    async def drain_connections(self) -> None:
        """Stop accepting and reading requests; answer what is in flight (a
        waiting Fetch answers at once with what it has) within
        ``shutdown_drain_timeout_ms``; then close every connection."""
        if self._server is not None:
            self._server.close()
        for server in self._extra_servers:
            server.close()
        if not self.stopping.done():
            self.stopping.set_result(None)
        conns = list(self._connections)
        for conn in conns:
            conn.drain()
        waiting = [c.closed for c in conns if not c.closed.done()]
        if waiting:
            await asyncio.wait(waiting, timeout=self.config.shutdown_drain_timeout_ms / 1000)
        left = [c for c in self._connections if not c.closed.done()]
        if left:
            log.warning("closing %d connections still busy after the drain timeout", len(left))
        for conn in left:
            conn.abort()

    async def stop(self) -> None:
        """Stop accepting, answer requests in flight and close connections,
        then flush and close storage. In a
        cluster, first hand every partition led here to other brokers."""
        if self.member is not None:
            try:
                await self.member.drain()
            except Exception:  # noqa: BLE001 - the others recover the WAL instead
                log.warning("draining failed", exc_info=True)
            await self.member.stop()
        await self.drain_connections()
        await close_router(self)
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.txns.close()
        await self.consumer_groups.close()
        await self.groups.close()
        await self.engine.close()
        if self.member is not None and getattr(self.engine, "closed_cleanly", False):
            await self.member.leave()
        await asyncio.to_thread(self.store.close)
        log.info("broker stopped")


def _exit_now(reason: str) -> None:
    """A broker removed from its cluster must stop acknowledging at once; its
    supervisor restarts it as a new member."""
    os._exit(3)
