"""The proxy's side of a routed produce.

A broker that receives Produce from a client in its own rack (see
:func:`ingest.zone_router.routing.client_rack`) for partitions led by another
live broker does not answer NOT_LEADER_OR_FOLLOWER: it writes those
partitions' record batches to one router object in the shared object store,
sends each leader an Envelope naming the object and its partitions' byte
ranges, on the leader's inter-broker listener (no records cross between brokers), and builds the client's Produce
response from the leaders' answers, which pass through per partition. The
request's other partitions (those this broker leads) take the direct path
meanwhile. The object is deleted once every leader answered; objects left by
a broker that died first are removed by any broker after ``ORPHAN_AGE_S``.

Guarantees:
- acks keep their meaning: a partition is acknowledged only with the leader's
  own acknowledgement (acks=all: durable in the leader's WAL; the router
  object itself is durable before any leader is asked).
- Order: the connection's ``produce_order`` lock is held until every leader
  answered, so one connection has one routed request in flight and its
  partitions' batches reach their leaders in the order the client sent them.
- A leader that cannot be reached, or whose connection breaks, gives the
  partition NOT_LEADER_OR_FOLLOWER (retriable: the client refreshes metadata
  and retries; an idempotent producer's retry is deduplicated by the leader);
  a leader that does not answer in time gives REQUEST_TIMED_OUT.
- Clients that announce no rack, or another rack, are never routed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.envelope.v0.request import EnvelopeRequest
from kio.schema.produce.v11.response import ProduceResponse

from ingest.cluster.peer_connection import PeerSecurity
from ingest.cluster.view import BrokerEndpoint
from ingest.errors import StorageError
from ingest.handlers.base import RequestContext
from ingest.protocol.codec import ProtocolError
from ingest.protocol.errors import ErrorCode, error_class
from ingest.s3stream.objectstore.api import ObjectStore
from ingest.security.acl import enforce as acl
from ingest.zone_router import objects, responses, wire
from ingest.zone_router.leader import is_routed
from ingest.zone_router.peers import PeerConnections, Sender
from ingest.zone_router.routing import client_rack
from ingest.zone_router.state import object_store_of

__all__ = ["ORPHAN_AGE_S", "RoutedProduce", "ZoneRouter", "routed_produce"]

log = logging.getLogger(__name__)

ORPHAN_AGE_S = 300.0  # a router object older than this has no leader reading it
_SWEEP_EVERY_S = 60.0
_NO_TIMEOUT_WAIT_S = 30.0  # acks=1: what a leader may take (produce's own bound)
_SLACK_S = 5.0  # on top of the leader's own bound, for the round trip and the object read

Direct = Callable[[RequestContext, Any], Awaitable[ProduceResponse | None]]


class ZoneRouter:
    """One broker's routing state: its connections to leaders, the object
    deletions and orphan sweeps it runs in the background."""

    def __init__(
        self,
        node_id: int,
        store: ObjectStore,
        send: Sender | None = None,
        security: PeerSecurity | None = None,
    ) -> None:
        self.node_id = node_id
        self.store = store
        self._peers: PeerConnections | None = None
        if send is None:
            self._peers = PeerConnections(security=security)
            send = self._peers.send
        self.send: Sender = send
        self._background: set[asyncio.Task[Any]] = set()
        self._next_sweep = 0.0
        self.routed_requests = 0  # read by tests and metrics

    def close(self) -> None:
        if self._peers is not None:
            self._peers.close()

    def spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning("zone router background work failed: %s", exc)

    async def settled(self) -> None:
        """Wait for background deletions and sweeps (tests)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    def maybe_sweep(self) -> None:
        now = time.monotonic()
        if now >= self._next_sweep:
            self._next_sweep = now + _SWEEP_EVERY_S
            self.spawn(self.sweep())

    async def sweep(self, now_s: float | None = None) -> int:
        """Delete router objects older than ORPHAN_AGE_S (any writer's)."""
        old = []
        for info in await self.store.list(objects.PREFIX):
            age = objects.key_age_s(info.key, now_s)
            if age is not None and age > ORPHAN_AGE_S:
                old.append(info.key)
        if old:
            await self.store.delete(old)
        return len(old)


_routers: weakref.WeakKeyDictionary[Any, ZoneRouter] = weakref.WeakKeyDictionary()


def router_of(broker: Any) -> ZoneRouter | None:
    """The broker's router (made on first use), or None without an object store."""
    router = _routers.get(broker)
    if router is None:
        store = object_store_of(broker)
        if store is None:
            return None
        router = getattr(broker, "zone_router", None) or ZoneRouter(
            broker.cluster.node_id, store, security=getattr(broker, "peer_security", None)
        )
        _routers[broker] = router
    return router


async def close_router(broker: Any, timeout_s: float = 5.0) -> None:
    """Stop the broker's router, if it made one: let its object deletions
    finish (for at most ``timeout_s``), then close its kept-open connections
    to leaders. A broker calls it as it stops; the next use makes a new one."""
    router = _routers.pop(broker, None)
    if router is None:
        return
    try:
        await asyncio.wait_for(router.settled(), timeout_s)
    except TimeoutError:
        log.warning("zone router: object deletions still running at stop; the sweep ends them")
    router.close()


def routed_produce(ctx: RequestContext, request: Any) -> RoutedProduce | None:
    """The routing of a Produce request, or None when it takes the direct path
    (no partition of it is to be routed). Cheap for clients without a rack."""
    rack = client_rack(ctx.client_id)
    if not rack or is_routed(ctx) or int(request.acks) not in (0, 1, -1):
        return None
    broker = ctx.broker
    cluster = broker.cluster
    if not cluster.clustered:
        return None
    me = cluster.node_id
    live = {b.node_id: b for b in cluster.brokers()}
    own = live.get(me)
    if own is None or own.rack != rack:
        return None
    logs = broker.logs
    routed: dict[int, list[tuple[str, Any]]] = {}
    for t in request.topic_data:
        for p in t.partition_data:
            index = int(p.index)
            if logs.partition(t.name, index) is not None:
                continue
            if logs.partition_error(t.name, index) != ErrorCode.not_leader_or_follower:
                continue
            leader, _ = cluster.leader(t.name, index)
            if leader != me and leader in live:
                routed.setdefault(leader, []).append((str(t.name), p))
    if not routed:
        return None
    router = router_of(broker)
    if router is None:
        return None
    listener = getattr(broker, "inter_broker_listener", None)
    return RoutedProduce(router, ctx, request, routed, {n: live[n].on(listener) for n in routed})


@dataclass
class RoutedProduce:
    router: ZoneRouter
    ctx: RequestContext
    request: Any  # a ProduceRequest of any version
    routed: dict[int, list[tuple[str, Any]]]  # leader -> (topic, PartitionProduceData)
    leaders: dict[int, BrokerEndpoint | None]  # at the inter-broker listener (None: it has none)
    _results: list[responses.PartitionResult] = field(default_factory=list)
    _throttle: int = 0

    async def run(self, direct: Direct) -> ProduceResponse | None:
        """Answer the request: routed partitions through their leaders, the
        rest through ``direct`` (the Produce path without routing)."""
        lock = self.ctx.produce_order
        async with lock if lock is not None else contextlib.nullcontext():
            return await self._run(direct)

    async def _run(self, direct: Direct) -> ProduceResponse | None:
        ctx, request, router = self.ctx, self.request, self.router
        acks = int(request.acks)
        order = [(str(t.name), int(p.index)) for t in request.topic_data for p in t.partition_data]
        routed_keys = {
            (topic, int(p.index)) for parts in self.routed.values() for topic, p in parts
        }
        local_request = _without(request, routed_keys)
        local = None
        if local_request is not None:
            local = asyncio.ensure_future(
                direct(dataclasses.replace(ctx, produce_order=None), local_request)
            )
        router.maybe_sweep()
        router.routed_requests += 1
        try:
            await self._route(acks)
        finally:
            local_response = await local if local is not None else None
        if acks == 0:
            for topic, p in self._results:
                if p.error_code != ErrorCode.none:
                    raise error_class(p.error_code)(
                        f"acks=0 routed produce to {topic}-{int(p.index)} failed: {p.error_message}"
                    )
            return None
        results = list(self._results)
        throttle = self._throttle
        if local_response is not None:
            results += responses.results_of(local_response)
            throttle = max(throttle, responses.throttle_ms(local_response))
        return responses.merge(order, results, throttle)

    async def _route(self, acks: int) -> None:
        ctx, request, router = self.ctx, self.request, self.router
        tid = request.transactional_id
        segments: list[objects.Segment] = []
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for leader, parts in self.routed.items():
            for topic, p in parts:
                index = int(p.index)
                denied = acl.produce_denied(ctx, tid, topic)
                if denied is not None:
                    self._fail(topic, index, denied[0], denied[1] or "denied")
                elif p.records is None:
                    self._fail(topic, index, ErrorCode.invalid_record, "no records")
                else:
                    segments.append(objects.Segment(topic, index, p.records))
                    by_leader.setdefault(leader, []).append((topic, index))
        if not segments:
            return
        data, refs = objects.encode_segments(segments)
        ref_of = {(r.topic, r.partition): r for r in refs}
        key = objects.new_key(router.node_id)
        try:
            await router.store.put(key, data)
        except (StorageError, OSError) as exc:
            for r in refs:
                self._fail(
                    r.topic, r.partition, ErrorCode.kafka_storage_error, f"router object: {exc}"
                )
            return
        try:
            await asyncio.gather(
                *(
                    self._forward(leader, key, tuple(ref_of[k] for k in keys), acks)
                    for leader, keys in by_leader.items()
                )
            )
        finally:
            router.spawn(router.store.delete([key]))

    async def _forward(
        self, leader: int, key: str, refs: tuple[objects.SegmentRef, ...], acks: int
    ) -> None:
        ctx, request = self.ctx, self.request
        timeout_ms = int(request.timeout.total_seconds() * 1000)
        inner_acks = -1 if acks == -1 else 1
        wait_s = max(1.0, timeout_ms / 1000) if acks == -1 else _NO_TIMEOUT_WAIT_S
        tid = request.transactional_id
        envelope = EnvelopeRequest(
            request_data=wire.encode(
                wire.RoutedRequest(
                    key,
                    inner_acks,
                    timeout_ms,
                    None if tid is None else str(tid),
                    ctx.client_id,
                    refs,
                )
            ),
            request_principal=acl.principal(ctx).encode(),
            client_host_address=ctx.client_host.encode(),
        )
        endpoint = self.leaders[leader]
        if endpoint is None:
            why = f"leader {leader} has no inter-broker listener"
            return self._fail_all(refs, ErrorCode.not_leader_or_follower, why)
        try:
            answer = await self.router.send(endpoint, envelope, wait_s + _SLACK_S)
        except TimeoutError:
            return self._fail_all(
                refs, ErrorCode.request_timed_out, f"leader {leader} did not answer in time"
            )
        except (OSError, EOFError, ProtocolError) as exc:
            return self._fail_all(
                refs, ErrorCode.not_leader_or_follower, f"leader {leader} unreachable: {exc}"
            )
        if answer.error_code != ErrorCode.none or answer.response_data is None:
            code = ErrorCode(answer.error_code)
            return self._fail_all(
                refs, code, f"leader {leader} refused the routed produce: {code.name}"
            )
        try:
            response = responses.decode(answer.response_data)
        except ProtocolError as exc:
            return self._fail_all(refs, ErrorCode.unknown_server_error, f"leader {leader}: {exc}")
        self._results += responses.results_of(response)
        self._throttle = max(self._throttle, responses.throttle_ms(response))

    def _fail(self, topic: str, index: int, code: ErrorCode, message: str) -> None:
        self._results.append((topic, responses.failed(index, code, message)))

    def _fail_all(
        self, refs: tuple[objects.SegmentRef, ...], code: ErrorCode, message: str
    ) -> None:
        for r in refs:
            self._fail(r.topic, r.partition, code, message)


def _without(request: Any, drop: set[tuple[str, int]]) -> Any | None:
    """``request`` without the partitions in ``drop``, or None when none is left."""
    topics = []
    for t in request.topic_data:
        kept = tuple(p for p in t.partition_data if (str(t.name), int(p.index)) not in drop)
        if kept:
            topics.append(dataclasses.replace(t, partition_data=kept))
    return dataclasses.replace(request, topic_data=tuple(topics)) if topics else None
