"""The leader's side of a routed produce: an Envelope (API key 58) from a
broker of the same cluster names a router object and, per partition, where
its segment lies; the leader reads those bytes from object storage and appends
them through its ordinary Produce path (the ``append`` handler it is given:
the same validation, idempotent sequence checks, transaction checks, quotas,
ACLs, acks and durability as a direct Produce), then answers with that Produce
response.

Who may send it. The Kafka listener does not authenticate brokers to each
other (see :mod:`ingest.cluster.peer_client`), so the request is accepted only
when all of these hold, else CLUSTER_AUTHORIZATION_FAILED:
- this broker is in a cluster;
- it came in on this broker's inter-broker listener (as Kafka takes Envelope
  only on its inter-broker or controller listener);
- the connection comes from the host of a live broker of the cluster (its
  advertised host or any of its listeners' hosts, resolved to addresses);
- the key is a router object key (``router/<node>/<time>-<hex>``) written by
  another live broker.
A malformed request or a segment that does not check out (it names another
partition, or fails its CRC) gets INVALID_REQUEST; nothing is appended then.

Limits: a client on a broker's own host (or behind the same address) passes
the host check. What it can do with that is bounded: it can only make a leader
append a segment a broker wrote, to the partition that segment names, while
the object exists (it is deleted as soon as the leader answered); batches a
broker wrote for an authorised client, which idempotent producers' sequence
checks turn away when they are replayed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable

from kio.schema.envelope.v0.request import EnvelopeRequest
from kio.schema.envelope.v0.response import EnvelopeResponse
from kio.schema.produce.v11.request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kio.schema.produce.v11.response import ProduceResponse
from kio.schema.types import TopicName, TransactionalId
from kio.static.primitive import Records, i16, i32, i32Timedelta

from ingest.cluster.view import BrokerEndpoint
from ingest.errors import StorageError
from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode
from ingest.security.acl import enforce as acl
from ingest.security.sasl import SecuritySession
from ingest.zone_router import objects, responses, wire
from ingest.zone_router.state import object_store_of

__all__ = ["ENVELOPE", "is_routed", "serve"]

ENVELOPE = 58
_MAX_SPAN = 256 * 1024 * 1024  # bytes one request may make the leader read

Append = Callable[[RequestContext, ProduceRequest], Awaitable[ProduceResponse | None]]


def is_routed(ctx: RequestContext) -> bool:
    """Whether ``ctx`` is a leader appending for a proxy (its records came
    from object storage, not from the client): such a produce is never routed
    again, and carries no client payload over the network."""
    return ctx.api_key == ENVELOPE


def _answer(code: ErrorCode, data: bytes | None = None) -> EnvelopeResponse:
    return EnvelopeResponse(response_data=data, error_code=code)


async def serve(ctx: RequestContext, envelope: EnvelopeRequest, append: Append) -> EnvelopeResponse:
    broker = ctx.broker
    cluster = broker.cluster
    store = object_store_of(broker)
    if not cluster.clustered or store is None:
        return _answer(ErrorCode.cluster_authorization_failed)
    try:
        req = wire.decode(envelope.request_data)
    except wire.WireError:
        return _answer(ErrorCode.invalid_request)
    live = {b.node_id: b for b in cluster.brokers()}
    writer = objects.key_writer(req.key)
    if writer is None or writer == cluster.node_id or writer not in live:
        return _answer(ErrorCode.cluster_authorization_failed)
    if not _on_inter_broker_listener(ctx) or not await _from_member(ctx.client_host, live.values()):
        return _answer(ErrorCode.cluster_authorization_failed)
    if acl.enabled(ctx) and not acl.authorize_cluster(ctx, acl.AclOperation.CLUSTER_ACTION):
        # with an authorizer on, only the brokers' own login may hand over
        # produce (as Kafka asks of Envelope and WriteTxnMarkers)
        return _answer(ErrorCode.cluster_authorization_failed)
    if not req.segments or req.acks not in (1, -1):
        return _answer(ErrorCode.invalid_request)
    lo = min(s.position for s in req.segments)
    hi = max(s.position + s.size for s in req.segments)
    if hi - lo > _MAX_SPAN:
        return _answer(ErrorCode.invalid_request)
    try:
        data = await store.get(req.key, lo, hi)
    except (StorageError, OSError) as exc:
        # The proxy gave up (and deleted the object) or storage failed: retriable.
        why = f"routed records unreadable: {exc}"
        results = [
            (s.topic, responses.failed(s.partition, ErrorCode.kafka_storage_error, why))
            for s in req.segments
        ]
        order = [(s.topic, s.partition) for s in req.segments]
        return _answer(ErrorCode.none, responses.encode(responses.merge(order, results, 0)))
    try:
        records = [(s, bytes(objects.read_segment(data, s, lo))) for s in req.segments]
    except objects.RouterFormatError:
        return _answer(ErrorCode.invalid_request)
    topics: dict[str, list[PartitionProduceData]] = {}
    for s, raw in records:
        topics.setdefault(s.topic, []).append(
            PartitionProduceData(index=i32(s.partition), records=Records(raw))
        )
    request = ProduceRequest(
        transactional_id=None
        if req.transactional_id is None
        else TransactionalId(req.transactional_id),
        acks=i16(req.acks),
        timeout=i32Timedelta.parse(_ms(req.timeout_ms)),
        topic_data=tuple(
            TopicProduceData(name=TopicName(t), partition_data=tuple(ps))
            for t, ps in topics.items()
        ),
    )
    routed = dataclasses.replace(
        ctx,
        api_key=ENVELOPE,
        api_version=11,
        client_id=req.client_id,
        client_host=envelope.client_host_address.decode(errors="replace") or ctx.client_host,
        session=_session(ctx.session, envelope.request_principal),
        produce_order=None,
    )
    response = await append(routed, request)
    if response is None:  # acks=0 is never sent; keep the type honest
        response = ProduceResponse(responses=(), throttle_time=i32Timedelta.parse(_ms(0)))
    return _answer(ErrorCode.none, responses.encode(response))


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=max(0, ms))


def _on_inter_broker_listener(ctx: RequestContext) -> bool:
    """Whether the request came in on the broker's inter-broker listener
    (Kafka takes Envelope only there), when both are known."""
    expected = getattr(ctx.broker, "inter_broker_listener", None)
    listener = getattr(ctx.session, "listener", None)
    name = getattr(listener, "name", None)
    return expected is None or name is None or name == expected


def _session(conn: SecuritySession | None, principal: bytes | None) -> SecuritySession | None:
    """The client's principal, as the proxy authenticated it, for the
    leader's ACL and quota checks."""
    if conn is None or principal is None:
        return conn
    session = SecuritySession(conn.listener)
    session.principal = principal.decode(errors="replace")
    session.authenticated = True
    return session


_resolved: dict[str, frozenset[str]] = {}


async def _addresses(host: str) -> frozenset[str]:
    known = _resolved.get(host)
    if known is not None:
        return known
    try:
        return frozenset({_norm(host)})
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return frozenset()
    found = frozenset(_norm(str(info[4][0])) for info in infos)
    if len(_resolved) > 1024:
        _resolved.clear()
    _resolved[host] = found
    return found


def _norm(address: str) -> str:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip)


async def _from_member(client_host: str, brokers: Iterable[BrokerEndpoint]) -> bool:
    try:
        peer = _norm(client_host)
    except ValueError:
        return False
    members = list(brokers)
    hosts = {b.host for b in members} | {x.host for b in members for x in b.listeners}
    for host in hosts:
        if peer in await _addresses(host):
            return True
    return False
