"""CreateTopics (key 19), including validate-only.

The response is built as a version 7 entity (every field the served versions
have); the dispatcher narrows it to the version the client asked for.
"""

from __future__ import annotations

import datetime
from typing import Union

from kio.schema.create_topics import v2, v3, v4, v5, v6, v7
from kio.schema.create_topics.v7.response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)
from kio.schema.types import TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode, KafkaError
from ingest.security.acl import enforce as acl

__all__ = ["handle", "CreateTopicsRequest"]

CreateTopicsRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    v2.CreateTopicsRequest,
    v3.CreateTopicsRequest,
    v4.CreateTopicsRequest,
    v5.CreateTopicsRequest,
    v6.CreateTopicsRequest,
    v7.CreateTopicsRequest,
]

_SOURCE_DEFAULT = i8(5)
_SOURCE_TOPIC = i8(1)


def _failed(name: str, code: ErrorCode, message: str) -> CreatableTopicResult:
    return CreatableTopicResult(
        name=TopicName(name),
        topic_id=None,
        error_code=code,
        error_message=message,
        num_partitions=i32(-1),
        replication_factor=i16(-1),
        configs=None,
    )


async def handle(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    broker = ctx.broker
    cfg = broker.config
    out: list[CreatableTopicResult] = []
    seen: dict[str, int] = {}
    for t in request.topics:
        seen[t.name] = seen.get(t.name, 0) + 1
    for t in request.topics:
        if seen[t.name] > 1:
            out.append(
                _failed(
                    t.name, ErrorCode.invalid_request, f"topic {t.name!r} appears more than once"
                )
            )
            continue
        if (denied := acl.create_topic_denied(ctx, t.name)) is not None:
            out.append(_failed(t.name, *denied))
            continue
        partitions = int(t.num_partitions)
        rf = int(t.replication_factor)
        if t.assignments:
            if partitions != -1 or rf != -1:
                out.append(
                    _failed(
                        t.name,
                        ErrorCode.invalid_request,
                        "give either replica assignments or partitions and replication factor",
                    )
                )
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
            out.append(_failed(t.name, ErrorCode(exc.error_code), exc.message or str(exc)))
            continue
        topic_configs: tuple[CreatableTopicConfigs, ...] | None = None
        if topic is not None:
            resolved = topic.config
            assert resolved is not None
            topic_configs = tuple(
                CreatableTopicConfigs(
                    name=name,
                    value=resolved.get(name),
                    read_only=False,
                    config_source=_SOURCE_TOPIC if name in resolved.overrides else _SOURCE_DEFAULT,
                    is_sensitive=False,
                )
                for name in sorted(broker.logs.configs.names())
            )
        out.append(
            CreatableTopicResult(
                name=TopicName(t.name),
                topic_id=topic.topic_id if topic is not None else None,
                error_code=ErrorCode.none,
                error_message=None,
                num_partitions=i32(partitions),
                replication_factor=i16(rf),
                configs=topic_configs,
            )
        )
    return CreateTopicsResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)), topics=tuple(out)
    )
