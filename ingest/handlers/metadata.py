"""Metadata (key 3): brokers, topics, partitions; auto-creates topics."""

from __future__ import annotations

from typing import Any

from ingest.handlers.base import RequestContext
from ingest.log.manager import validate_topic_name
from ingest.protocol.errors import ErrorCode, KafkaError

__all__ = ["handle", "describe_topic"]


def describe_topic(ctx: RequestContext, name: str) -> dict[str, Any]:
    broker = ctx.broker
    topic = broker.logs.get(name)
    if topic is None:
        return {"error_code": ErrorCode.unknown_topic_or_partition, "name": name, "partitions": []}
    node = broker.config.node_id
    return {
        "error_code": 0,
        "name": name,
        "topic_id": topic.topic_id,
        "is_internal": False,
        "partitions": [
            {
                "error_code": 0,
                "partition_index": p.partition,
                "leader_id": node,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": [node],
                "isr_nodes": [node],
                "offline_replicas": [],
            }
            for p in topic.partitions
        ],
        "topic_authorized_operations": -2147483648,
    }


async def handle(ctx: RequestContext, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    requested = request.topics
    # Version 0 has no null: an empty list asks for every topic.
    if requested is None or (ctx.api_version == 0 and not requested):
        names = sorted(broker.logs.topics)
    else:
        names = []
        for t in requested:
            name = t.name
            if name is None and t.topic_id is not None:
                topic = broker.logs.topics_by_id.get(t.topic_id)
                name = topic.name if topic else None
            if name is not None:
                names.append(name)
    # Version 0 has no allow_auto_topic_creation field and always auto-creates.
    allow_auto = getattr(request, "allow_auto_topic_creation", True)
    topics: list[dict[str, Any]] = []
    for name in names:
        if broker.logs.get(name) is None and allow_auto and broker.config.auto_create_topics:
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
                    topics.append({"error_code": exc.error_code, "name": name, "partitions": []})
                    continue
        topics.append(describe_topic(ctx, name))
    cfg = broker.config
    return {
        "throttle_time": 0,
        "brokers": [
            {"node_id": cfg.node_id, "host": cfg.public_host, "port": broker.port, "rack": None}
        ],
        "cluster_id": broker.cluster_id,
        "controller_id": cfg.node_id,
        "topics": topics,
        "cluster_authorized_operations": -2147483648,
    }
