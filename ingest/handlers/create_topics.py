"""CreateTopics (key 19), including validate-only."""

from __future__ import annotations

from typing import Any

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode, KafkaError

__all__ = ["handle"]

_SOURCE_DEFAULT = 5
_SOURCE_TOPIC = 1


async def handle(ctx: RequestContext, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    cfg = broker.config
    out = []
    seen: dict[str, int] = {}
    for t in request.topics:
        seen[t.name] = seen.get(t.name, 0) + 1
    for t in request.topics:
        entry: dict[str, Any] = {
            "name": t.name,
            "error_code": 0,
            "num_partitions": -1,
            "replication_factor": -1,
        }
        if seen[t.name] > 1:
            entry.update(
                error_code=ErrorCode.invalid_request,
                error_message=f"topic {t.name!r} appears more than once",
            )
            out.append(entry)
            continue
        partitions = int(t.num_partitions)
        rf = int(t.replication_factor)
        if t.assignments:
            if partitions != -1 or rf != -1:
                entry.update(
                    error_code=ErrorCode.invalid_request,
                    error_message="give either replica assignments or partitions and replication factor",
                )
                out.append(entry)
                continue
            partitions = len(t.assignments)
            rf = len(t.assignments[0].broker_ids) or 1
        if partitions == -1:
            partitions = cfg.default_partitions
        if rf == -1:
            rf = cfg.default_replication_factor
        configs = {c.name: c.value for c in t.configs}
        try:
            topic = await broker.logs.create_topic(
                t.name, partitions, rf, configs, validate_only=bool(request.validate_only)
            )
        except KafkaError as exc:
            entry.update(error_code=exc.error_code, error_message=exc.message or str(exc))
            out.append(entry)
            continue
        entry.update(num_partitions=partitions, replication_factor=rf)
        if topic is not None:
            entry["topic_id"] = topic.topic_id
            resolved = topic.config
            assert resolved is not None
            entry["configs"] = [
                {
                    "name": name,
                    "value": resolved.get(name),
                    "read_only": False,
                    "config_source": _SOURCE_TOPIC
                    if name in resolved.overrides
                    else _SOURCE_DEFAULT,
                    "is_sensitive": False,
                }
                for name in sorted(broker.logs.configs.names())
            ]
        out.append(entry)
    return {"throttle_time": 0, "topics": out}
