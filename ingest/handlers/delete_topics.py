"""DeleteTopics (key 20), by name or by topic id."""

from __future__ import annotations

from typing import Any

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode, KafkaError

__all__ = ["handle"]


async def handle(ctx: RequestContext, request: Any) -> dict[str, Any]:
    logs = ctx.broker.logs
    if hasattr(request, "topic_names"):
        wanted = [(name, None) for name in request.topic_names]
    else:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    out = []
    for name, topic_id in wanted:
        entry: dict[str, Any] = {"name": name, "topic_id": topic_id, "error_code": 0}
        if name is None and topic_id is not None:
            topic = logs.topics_by_id.get(topic_id)
            if topic is None:
                entry["error_code"] = ErrorCode.unknown_topic_id
                out.append(entry)
                continue
            name = topic.name
            entry["name"] = name
        try:
            topic = logs.get(name) if name else None
            if topic is not None:
                entry["topic_id"] = topic.topic_id
            await logs.delete_topic(name or "")
        except KafkaError as exc:
            entry.update(error_code=exc.error_code, error_message=exc.message)
        out.append(entry)
    return {"throttle_time": 0, "responses": out}
