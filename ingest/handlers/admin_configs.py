"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).

Each response is built as the entity of the highest version served (every
field the served versions have); the dispatcher narrows it to the version the
client asked for. Only topic configs can be changed; a broker's are read-only.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Union

from kio.schema.alter_configs import v0 as a0
from kio.schema.alter_configs import v1 as a1
from kio.schema.alter_configs import v2 as a2
from kio.schema.alter_configs.v2 import response as altered
from kio.schema.describe_configs import v1 as d1
from kio.schema.describe_configs import v2 as d2
from kio.schema.describe_configs import v3 as d3
from kio.schema.describe_configs import v4 as d4
from kio.schema.describe_configs.v4.response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from kio.schema.incremental_alter_configs import v0 as i0
from kio.schema.incremental_alter_configs import v1 as i1
from kio.schema.incremental_alter_configs.v1 import response as incremented
from kio.static.primitive import i8, i32Timedelta

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode, KafkaError
from ingest.security.acl import enforce as acl

__all__ = [
    "handle_describe",
    "handle_alter",
    "handle_incremental_alter",
    "DescribeConfigsRequest",
    "AlterConfigsRequest",
    "IncrementalAlterConfigsRequest",
]

DescribeConfigsRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    d1.DescribeConfigsRequest,
    d2.DescribeConfigsRequest,
    d3.DescribeConfigsRequest,
    d4.DescribeConfigsRequest,
]
AlterConfigsRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    a0.AlterConfigsRequest,
    a1.AlterConfigsRequest,
    a2.AlterConfigsRequest,
]
IncrementalAlterConfigsRequest = Union[  # noqa: UP007 - a runtime alias of every version we serve
    i0.IncrementalAlterConfigsRequest,
    i1.IncrementalAlterConfigsRequest,
]

TOPIC = 2
BROKER = 4
_SOURCE_TOPIC = i8(1)
_SOURCE_STATIC_BROKER = i8(4)
_SOURCE_DEFAULT = i8(5)
_STRING = 2
_TYPES = {"boolean": 1, "string": _STRING, "int": 3, "long": 5, "double": 6, "list": 7}
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3


_DESCRIBE, _ALTER = acl.AclOperation.DESCRIBE_CONFIGS, acl.AclOperation.ALTER_CONFIGS


def _no_throttle() -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(0))


def _broker_configs(ctx: RequestContext) -> dict[str, str]:
    c = ctx.broker.config
    return {
        "broker.id": str(c.node_id),
        "auto.create.topics.enable": str(c.auto_create_topics).lower(),
        "num.partitions": str(c.default_partitions),
        "default.replication.factor": str(c.default_replication_factor),
        "socket.request.max.bytes": str(c.max_request_bytes),
        "group.min.session.timeout.ms": str(c.group_min_session_timeout_ms),
        "group.max.session.timeout.ms": str(c.group_max_session_timeout_ms),
        "group.initial.rebalance.delay.ms": str(c.group_initial_rebalance_delay_ms),
    }


def _described(
    r: d4.request.DescribeConfigsResource
    | d3.request.DescribeConfigsResource
    | d2.request.DescribeConfigsResource
    | d1.request.DescribeConfigsResource,
    code: ErrorCode = ErrorCode.none,
    message: str | None = None,
    configs: tuple[DescribeConfigsResourceResult, ...] = (),
) -> DescribeConfigsResult:
    return DescribeConfigsResult(
        error_code=code,
        error_message=message,
        resource_type=r.resource_type,
        resource_name=r.resource_name,
        configs=configs,
    )


def _topic_configs(
    ctx: RequestContext, name: str, keys: set[str] | None, include_docs: bool
) -> tuple[DescribeConfigsResourceResult, ...] | None:
    topic = ctx.broker.logs.get(name)
    if topic is None:
        return None
    registry = ctx.broker.logs.configs
    assert topic.config is not None
    configs = []
    for key in sorted(registry.names()):
        if keys is not None and key not in keys:
            continue
        d = registry.defs[key]
        overridden = key in topic.config.overrides
        configs.append(
            DescribeConfigsResourceResult(
                name=key,
                value=None if d.sensitive else topic.config.get(key),
                read_only=False,
                config_source=_SOURCE_TOPIC if overridden else _SOURCE_DEFAULT,
                is_sensitive=d.sensitive,
                synonyms=(),
                config_type=i8(_TYPES.get(d.type, _STRING)),
                documentation=d.doc if include_docs else None,
            )
        )
    return tuple(configs)


async def handle_describe(
    ctx: RequestContext, request: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    results = []
    include_docs = bool(getattr(request, "include_documentation", False))  # v3+
    for r in request.resources:
        keys = set(r.configuration_keys) if r.configuration_keys is not None else None
        if (
            denied := acl.config_denied(ctx, r.resource_type, r.resource_name, _DESCRIBE)
        ) is not None:
            results.append(_described(r, *denied))
            continue
        if r.resource_type == TOPIC:
            configs = _topic_configs(ctx, r.resource_name, keys, include_docs)
            if configs is None:
                results.append(
                    _described(
                        r,
                        ErrorCode.unknown_topic_or_partition,
                        f"topic {r.resource_name!r} does not exist",
                    )
                )
            else:
                results.append(_described(r, configs=configs))
        elif r.resource_type == BROKER:
            if r.resource_name not in ("", str(ctx.broker.config.node_id)):
                results.append(
                    _described(r, ErrorCode.invalid_request, f"unknown broker {r.resource_name!r}")
                )
                continue
            broker_configs = tuple(
                DescribeConfigsResourceResult(
                    name=k,
                    value=v,
                    read_only=True,
                    config_source=_SOURCE_STATIC_BROKER,
                    is_sensitive=False,
                    synonyms=(),
                    config_type=i8(_STRING),
                    documentation=None,
                )
                for k, v in sorted(_broker_configs(ctx).items())
                if keys is None or k in keys
            )
            results.append(_described(r, configs=broker_configs))
        else:
            results.append(
                _described(
                    r,
                    ErrorCode.invalid_request,
                    f"resource type {r.resource_type} is not supported",
                )
            )
    return DescribeConfigsResponse(throttle_time=_no_throttle(), results=tuple(results))


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What became of one resource of an AlterConfigs or
    IncrementalAlterConfigs request (both answer with the same fields)."""

    resource_type: i8
    resource_name: str
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


async def _apply(
    ctx: RequestContext, kind: i8, name: str, new: dict[str, str], validate_only: bool
) -> _Outcome:
    try:
        await ctx.broker.logs.set_configs(name, new, validate_only=validate_only)
    except KafkaError as exc:
        return _Outcome(kind, name, ErrorCode(exc.error_code), exc.message or str(exc))
    return _Outcome(kind, name)


def _not_topic(kind: i8, name: str, ctx: RequestContext | None = None) -> _Outcome | None:
    if ctx is not None and (denied := acl.config_denied(ctx, kind, name, _ALTER)) is not None:
        return _Outcome(kind, name, *denied)
    if kind == TOPIC:
        return None
    msg = (
        "dynamic broker configs are not supported"
        if kind == BROKER
        else f"resource type {kind} is not supported"
    )
    return _Outcome(kind, name, ErrorCode.invalid_request, msg)


async def handle_alter(
    ctx: RequestContext, request: AlterConfigsRequest
) -> altered.AlterConfigsResponse:
    out = []
    for r in request.resources:
        outcome = _not_topic(r.resource_type, r.resource_name, ctx)
        if outcome is None:
            new = {c.name: c.value for c in r.configs if c.value is not None}
            outcome = await _apply(
                ctx, r.resource_type, r.resource_name, new, bool(request.validate_only)
            )
        out.append(
            altered.AlterConfigsResourceResponse(
                error_code=outcome.error_code,
                error_message=outcome.error_message,
                resource_type=outcome.resource_type,
                resource_name=outcome.resource_name,
            )
        )
    return altered.AlterConfigsResponse(throttle_time=_no_throttle(), responses=tuple(out))


def _incremented(
    ctx: RequestContext,
    r: i1.request.AlterConfigsResource | i0.request.AlterConfigsResource,
) -> dict[str, str] | _Outcome:
    """The topic's overrides after the request's operations, or why not."""
    kind, name = r.resource_type, r.resource_name
    topic = ctx.broker.logs.get(name)
    if topic is None:
        return _Outcome(
            kind, name, ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist"
        )
    assert topic.config is not None
    registry = ctx.broker.logs.configs
    new = dict(topic.config.overrides)
    for c in r.configs:
        key = registry.canonical(c.name)
        op = int(c.config_operation)
        if op == _SET:
            if c.value is None:
                return _Outcome(kind, name, ErrorCode.invalid_request, f"no value for {c.name}")
            new[key] = c.value
        elif op == _DELETE:
            new.pop(key, None)
        elif op in (_APPEND, _SUBTRACT):
            d = registry.defs.get(key)
            if d is None or d.type != "list":
                return _Outcome(
                    kind,
                    name,
                    ErrorCode.invalid_config,
                    f"{c.name} is not a list config; APPEND/SUBTRACT need one",
                )
            current = [v for v in (topic.config.get(key) or "").split(",") if v]
            items = [v for v in (c.value or "").split(",") if v]
            if op == _APPEND:
                current += [v for v in items if v not in current]
            else:
                current = [v for v in current if v not in items]
            new[key] = ",".join(current)
        else:
            return _Outcome(kind, name, ErrorCode.invalid_request, f"unknown operation {op}")
    return new


async def handle_incremental_alter(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> incremented.IncrementalAlterConfigsResponse:
    out = []
    for r in request.resources:
        outcome = _not_topic(r.resource_type, r.resource_name, ctx)
        if outcome is None:
            new = _incremented(ctx, r)
            if isinstance(new, _Outcome):
                outcome = new
            else:
                outcome = await _apply(
                    ctx, r.resource_type, r.resource_name, new, bool(request.validate_only)
                )
        out.append(
            incremented.AlterConfigsResourceResponse(
                error_code=outcome.error_code,
                error_message=outcome.error_message,
                resource_type=outcome.resource_type,
                resource_name=outcome.resource_name,
            )
        )
    return incremented.IncrementalAlterConfigsResponse(
        throttle_time=_no_throttle(), responses=tuple(out)
    )
