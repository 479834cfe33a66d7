"""CreatePartitions (key 37).

The response is built as a version 3 entity (every version has the same
fields); the dispatcher narrows it to the version the client asked for.
"""

from __future__ import annotations

import datetime
from typing import Union

from kio.schema.create_partitions import v0, v1, v2, v3
from kio.schema.create_partitions.v3.response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32Timedelta

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode, KafkaError
from ingest.security.acl import enforce as acl

__all__ = ["handle", "CreatePartitionsRequest"]

CreatePartitionsRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v0.CreatePartitionsRequest,
    v1.CreatePartitionsRequest,
    v2.CreatePartitionsRequest,
    v3.CreatePartitionsRequest,
]


async def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    results = []
    for t in request.topics:
        if (denied := acl.topic_denied(ctx, t.name, acl.AclOperation.ALTER)) is not None:
            code, message = denied
            results.append(
                CreatePartitionsTopicResult(
                    name=TopicName(t.name), error_code=code, error_message=message
                )
            )
            continue
        try:
            await ctx.broker.logs.create_partitions(
                t.name, int(t.count), validate_only=bool(request.validate_only)
            )
        except KafkaError as exc:
            results.append(
                CreatePartitionsTopicResult(
                    name=TopicName(t.name),
                    error_code=ErrorCode(exc.error_code),
                    error_message=exc.message,
                )
            )
            continue
        results.append(
            CreatePartitionsTopicResult(name=TopicName(t.name), error_code=ErrorCode.none)
        )
    return CreatePartitionsResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)), results=tuple(results)
    )
