"""Partition requests of a rack-routed client that reach a broker which does
not lead the partition (issue #16, zero cross-AZ traffic).

Metadata names a broker of the client's rack as the leader of every partition
for a client whose ``client.id`` carries ``tidelake_rack=<rack>``
(:mod:`ingest.handlers.metadata`), so such a client sends all its partition
requests there. Produce is routed through object storage
(:mod:`ingest.zone_router`), Fetch is served from object storage
(:mod:`ingest.handlers.fetch`); the requests that carry no payload
(ListOffsets, OffsetForLeaderEpoch, DeleteRecords) are forwarded here to the
partition's real leader on the inter-broker listener, with the broker's
inter-broker security (:func:`ingest.cluster.peer_client.peer_request`), and
the leader's
per-partition answers are passed back unchanged, so the client sees exactly
what the leader would have told it. A leader that cannot be reached in
:data:`FORWARD_TIMEOUT_S` gives NOT_LEADER_OR_FOLLOWER for its partitions
(retriable: the client refreshes its metadata and asks again).

One Fetch case is forwarded too: a read_committed consumer that announced its
rack only in ``client.id`` (no ``client.rack``) and meets transactional data
at the replica, which cannot filter it. The replica reads that partition from
the leader (:func:`fetch_from_leader`) instead of sending the consumer there,
since a client on Fetch v4-v10 cannot be sent (no preferred read replica) and
Metadata would send it back. These payload bytes cross racks between brokers.

Clients without the token are never forwarded: they get Kafka's answers.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Sequence
from typing import Any

from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v12.response import FetchResponse, PartitionData
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from ingest.cluster.peer_client import peer_request
from ingest.cluster.peer_connection import PeerAuthenticationError
from ingest.cluster.racks import client_id_rack
from ingest.cluster.view import BrokerEndpoint
from ingest.handlers.base import RequestContext
from ingest.protocol.codec import ProtocolError

__all__ = [
    "FORWARD_TIMEOUT_S",
    "ask_leaders",
    "fetch_from_leader",
    "leader_elsewhere",
    "routed_rack",
]

FORWARD_TIMEOUT_S = 10.0
log = logging.getLogger(__name__)
_CLIENT_ID = "tidelake-rack-forward"
_FETCH, _FETCH_VERSION = 1, 12
_READ_COMMITTED = i8(1)


def routed_rack(ctx: RequestContext) -> str:
    """The rack the client announces in its ``client.id`` when this broker is
    part of a cluster (Metadata routes it then), else ``""``."""
    if not ctx.broker.cluster.clustered:
        return ""
    return client_id_rack(ctx.client_id)


def leader_elsewhere(ctx: RequestContext, topic: str, partition: int) -> BrokerEndpoint | None:
    """For a rack-routed client, the live leader (at its inter-broker
    listener) of a partition that exists, is not served here and is not
    moving; else None."""
    if not routed_rack(ctx):
        return None
    broker = ctx.broker
    logs = broker.logs
    if (
        logs.partition(topic, partition) is not None
        or not logs.has_partition(topic, partition)
        or logs.moving(topic, partition)
    ):
        return None
    leader = broker.cluster.leader(topic, partition)[0]
    if leader < 0 or leader == broker.cluster.node_id:
        return None
    return _inter_broker(ctx, leader)


def _inter_broker(ctx: RequestContext, node_id: int) -> BrokerEndpoint | None:
    """Live broker ``node_id`` at the inter-broker listener, or None."""
    broker = ctx.broker
    for b in broker.cluster.brokers():
        if b.node_id == node_id:
            return b.on(broker.inter_broker_listener)
    return None


async def ask_leaders(
    ctx: RequestContext,
    api_key: int,
    api_version: int,
    requests: Sequence[tuple[BrokerEndpoint, Any]],
) -> list[Any | None]:
    """Send each (leader, request) concurrently; the responses in order, None
    for a leader that did not answer (or refused this broker)."""
    security = ctx.broker.peer_security

    async def one(endpoint: BrokerEndpoint, request: Any) -> Any | None:
        try:
            return await peer_request(
                endpoint, api_key, api_version, request, FORWARD_TIMEOUT_S, _CLIENT_ID, security
            )
        except PeerAuthenticationError:
            log.warning("leader %d refused this broker's inter-broker login", endpoint.node_id)
            return None
        except (OSError, TimeoutError, ProtocolError, ConnectionError, EOFError):
            return None

    return list(await asyncio.gather(*(one(e, r) for e, r in requests)))


async def fetch_from_leader(
    ctx: RequestContext, topic: str, partition: int, offset: int, max_bytes: int
) -> PartitionData | None:
    """The leader's read_committed answer (records, last stable offset,
    aborted transactions) for one partition at ``offset``, without waiting;
    None when the leader is unknown or does not answer."""
    leader = ctx.broker.cluster.leader(topic, partition)[0]
    endpoint = _inter_broker(ctx, leader)
    if endpoint is None or leader == ctx.broker.cluster.node_id:
        return None
    size = i32(max(1, min(max_bytes, 0x7FFFFFFF)))
    request = FetchRequest(
        replica_id=BrokerId(-1),
        max_wait=i32Timedelta.parse(datetime.timedelta(0)),
        min_bytes=i32(0),
        max_bytes=size,
        isolation_level=_READ_COMMITTED,
        topics=(
            FetchTopic(
                topic=TopicName(topic),
                partitions=(
                    FetchPartition(
                        partition=i32(partition), fetch_offset=i64(offset), partition_max_bytes=size
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    [response] = await ask_leaders(ctx, _FETCH, _FETCH_VERSION, [(endpoint, request)])
    if not isinstance(response, FetchResponse):
        return None
    found = [
        p for t in response.responses for p in t.partitions if int(p.partition_index) == partition
    ]
    return found[0] if found else None
