"""DeleteTopics (key 20), by name or by topic id.

The response is built as a version 6 entity (every field the served versions
have); the dispatcher narrows it to the version the client asked for.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Union

from kio.schema.delete_topics import v1, v2, v3, v4, v5, v6
from kio.schema.delete_topics.v6.response import DeletableTopicResult, DeleteTopicsResponse
from kio.schema.types import TopicName
from kio.static.primitive import i32Timedelta

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode, KafkaError
from ingest.security.acl import enforce as acl

__all__ = ["handle", "DeleteTopicsRequest"]

DeleteTopicsRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v1.DeleteTopicsRequest,
    v2.DeleteTopicsRequest,
    v3.DeleteTopicsRequest,
    v4.DeleteTopicsRequest,
    v5.DeleteTopicsRequest,
    v6.DeleteTopicsRequest,
]


async def _delete(
    ctx: RequestContext, name: str | None, topic_id: uuid.UUID | None
) -> DeletableTopicResult:
    logs = ctx.broker.logs
    if name is None and topic_id is not None:
        by_id = logs.topics_by_id.get(topic_id)
        if by_id is None:
            return DeletableTopicResult(
                name=None, topic_id=topic_id, error_code=ErrorCode.unknown_topic_id
            )
        name = by_id.name
    if name and (denied := acl.topic_denied(ctx, name, acl.AclOperation.DELETE)) is not None:
        code, message = denied
        return DeletableTopicResult(
            name=TopicName(name), topic_id=topic_id, error_code=code, error_message=message
        )
    try:
        topic = logs.get(name) if name else None
        if topic is not None:
            topic_id = topic.topic_id
        await logs.delete_topic(name or "")
    except KafkaError as exc:
        return DeletableTopicResult(
            name=TopicName(name) if name is not None else None,
            topic_id=topic_id,
            error_code=ErrorCode(exc.error_code),
            error_message=exc.message,
        )
    return DeletableTopicResult(
        name=TopicName(name) if name is not None else None,
        topic_id=topic_id,
        error_code=ErrorCode.none,
    )


async def handle(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    wanted: list[tuple[str | None, uuid.UUID | None]]
    if isinstance(request, v6.DeleteTopicsRequest):
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    return DeleteTopicsResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        responses=tuple([await _delete(ctx, name, topic_id) for name, topic_id in wanted]),
    )
