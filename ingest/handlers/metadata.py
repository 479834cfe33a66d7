"""Metadata (key 3): brokers, topics, partitions; auto-creates topics.

The response is built as a version 10 entity, the one version with every field
any version has (v11 dropped the cluster's authorized operations); the
dispatcher narrows it to the version the client asked for.

Brokers are named at their address on the listener the request came in on; a
broker without that listener is left out of the broker list, and a partition
it leads has no leader for this listener: LEADER_NOT_AVAILABLE up to v5,
LISTENER_NOT_FOUND from v6 (as Kafka answers; both are retriable).

In a cluster, each Metadata first reads the shared store's version (one
query; the whole view only when it changed), so the leaders it names are
those of the moment the request arrived, whichever broker answers.

Racks (issue #16): a client whose ``client.id`` carries ``tidelake_rack=<rack>``
is told that a broker of its rack leads each partition
(:func:`ingest.zone_router.leader_for_client`; its replica and ISR lists name
that broker too, the leader epoch stays the real one). That broker routes the
client's Produce through object storage, serves its Fetch from object storage,
and forwards its ListOffsets, OffsetForLeaderEpoch and DeleteRecords to the
real leader. A client without the token gets the real leaders.
"""

from __future__ import annotations

import datetime
from typing import Union

from kio.schema.metadata import (
    v0,
    v1,
    v2,
    v3,
    v4,
    v5,
    v6,
    v7,
    v8,
    v9,
    v10,
    v11,
    v12,
)
from kio.schema.metadata.v10.response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i32Timedelta

from ingest.cluster.view import BrokerEndpoint
from ingest.handlers.authorized_operations import ResourceType, operations_field
from ingest.handlers.base import RequestContext
from ingest.handlers.endpoints import brokers_seen
from ingest.log.manager import validate_topic_name
from ingest.protocol.errors import ErrorCode, KafkaError
from ingest.security.acl import enforce as acl
from ingest.zone_router import client_rack, leader_for_client

__all__ = ["handle", "describe_topic", "MetadataRequest"]

MetadataRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v0.MetadataRequest,
    v1.MetadataRequest,
    v2.MetadataRequest,
    v3.MetadataRequest,
    v4.MetadataRequest,
    v5.MetadataRequest,
    v6.MetadataRequest,
    v7.MetadataRequest,
    v8.MetadataRequest,
    v9.MetadataRequest,
    v10.MetadataRequest,
    v11.MetadataRequest,
    v12.MetadataRequest,
]

VIEW_REFRESH_WAIT_S = 0.5  # how long Metadata waits for the cluster store
_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
_DESCRIBE = acl.AclOperation.DESCRIBE


def describe_topic(
    ctx: RequestContext, name: str, *, include_operations: bool = False
) -> MetadataResponseTopic:
    broker = ctx.broker
    topic = broker.logs.get(name)
    if topic is None:
        return _topic_error(name, ErrorCode.unknown_topic_or_partition)
    seen = brokers_seen(ctx)
    # live brokers the request's listener cannot name
    unreachable = {b.node_id for b in broker.cluster.brokers()} - {b.node_id for b in seen}
    # a rack-routed client is told a broker of its rack leads the partition
    routed = seen if broker.cluster.clustered and client_rack(ctx.client_id) else None
    return MetadataResponseTopic(
        error_code=ErrorCode.none,
        name=TopicName(name),
        topic_id=topic.topic_id,
        is_internal=False,
        partitions=tuple(
            _partition(ctx, name, i, unreachable, routed) for i in range(topic.partition_count)
        ),
        topic_authorized_operations=i32(
            operations_field(ctx, ResourceType.TOPIC, name, asked=include_operations)
        ),
    )


def _partition(
    ctx: RequestContext,
    topic: str,
    index: int,
    unreachable: set[int],
    routed: list[BrokerEndpoint] | None = None,
) -> MetadataResponsePartition:
    """One partition as the cluster sees it: its leader (the one replica, since
    object storage, not brokers, keeps the copies), or LEADER_NOT_AVAILABLE
    while it moves between brokers. A live leader that has no endpoint on the
    request's listener (in ``unreachable``) cannot be named to this client.
    ``routed``: for a rack-routed client, the brokers it is listed (the leader
    named is then the broker of its rack :func:`leader_for_client` picks)."""
    leader, epoch = ctx.broker.cluster.leader(topic, index)
    if routed is not None and leader >= 0:
        leader = leader_for_client(ctx.client_id, topic, index, leader, routed)
    if leader in unreachable:
        node = BrokerId(leader)
        return MetadataResponsePartition(
            error_code=ErrorCode.listener_not_found
            if ctx.api_version >= 6
            else ErrorCode.leader_not_available,
            partition_index=i32(index),
            leader_id=BrokerId(-1),
            leader_epoch=i32(epoch),
            replica_nodes=(node,),
            isr_nodes=(node,),
            offline_replicas=(),
        )
    if leader < 0:
        return MetadataResponsePartition(
            error_code=ErrorCode.leader_not_available,
            partition_index=i32(index),
            leader_id=BrokerId(-1),
            leader_epoch=i32(-1),
            replica_nodes=(),
            isr_nodes=(),
            offline_replicas=(),
        )
    node = BrokerId(leader)
    return MetadataResponsePartition(
        error_code=ErrorCode.none,
        partition_index=i32(index),
        leader_id=node,
        leader_epoch=i32(epoch),
        replica_nodes=(node,),
        isr_nodes=(node,),
        offline_replicas=(),
    )


def _topic_error(name: str, error: ErrorCode) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=error, name=TopicName(name), topic_id=None, partitions=()
    )


async def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    # Leaders as the cluster has them when the request came in: a client sent
    # here by NOT_LEADER_OR_FOLLOWER must not be told the old leader again.
    await broker.refresh_view(VIEW_REFRESH_WAIT_S)
    requested = request.topics
    # Version 0 has no null: an empty list asks for every topic.
    names: list[str] = []
    if requested is None or (ctx.api_version == 0 and not requested):
        names = [
            n for n in sorted(broker.logs.topics) if acl.topic_denied(ctx, n, _DESCRIBE) is None
        ]
    else:
        for t in requested:
            name: str | None = t.name
            topic_id = getattr(t, "topic_id", None)  # v10+
            if name is None and topic_id is not None:
                by_id = broker.logs.topics_by_id.get(topic_id)
                name = by_id.name if by_id else None
            if name is not None:
                names.append(name)
    # Version 0 has no allow_auto_topic_creation field and always auto-creates.
    allow_auto: bool = getattr(request, "allow_auto_topic_creation", True)
    # v8+ (the cluster's operations only up to v10)
    topic_ops: bool = getattr(request, "include_topic_authorized_operations", False)
    cluster_ops: bool = getattr(request, "include_cluster_authorized_operations", False)
    topics: list[MetadataResponseTopic] = []
    for name in names:
        creates = broker.logs.get(name) is None and allow_auto and broker.config.auto_create_topics
        if (denied := acl.metadata_denied(ctx, name, would_create=creates)) is not None:
            topics.append(_topic_error(name, denied[0]))
            continue
        if creates:
            try:
                validate_topic_name(name)
                await broker.logs.create_topic(
                    name,
                    broker.config.default_partitions,
                    broker.config.default_replication_factor,
                    {},
                )
            except KafkaError as exc:
                if exc.error_code != ErrorCode.topic_already_exists:
                    topics.append(_topic_error(name, ErrorCode(exc.error_code)))
                    continue
        topics.append(describe_topic(ctx, name, include_operations=topic_ops))
    cluster = broker.cluster
    return MetadataResponse(
        throttle_time=_NO_THROTTLE,
        brokers=tuple(
            MetadataResponseBroker(
                node_id=BrokerId(b.node_id), host=b.host, port=i32(b.port), rack=b.rack
            )
            for b in brokers_seen(ctx)
        ),
        cluster_id=broker.cluster_id,
        controller_id=BrokerId(cluster.controller_id()),
        topics=tuple(topics),
        cluster_authorized_operations=i32(
            operations_field(ctx, ResourceType.CLUSTER, broker.cluster_id, asked=cluster_ops)
        ),
    )
