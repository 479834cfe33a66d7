"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44)."""

from __future__ import annotations

from typing import Any

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode, KafkaError

__all__ = ["handle_describe", "handle_alter", "handle_incremental_alter"]

TOPIC = 2
BROKER = 4
_SOURCE_TOPIC = 1
_SOURCE_STATIC_BROKER = 4
_SOURCE_DEFAULT = 5
_TYPES = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3


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


async def handle_describe(ctx: RequestContext, request: Any) -> dict[str, Any]:
    results = []
    include_docs = bool(getattr(request, "include_documentation", False))
    for r in request.resources:
        keys = set(r.configuration_keys) if r.configuration_keys is not None else None
        entry: dict[str, Any] = {
            "error_code": 0,
            "resource_type": r.resource_type,
            "resource_name": r.resource_name,
        }
        if r.resource_type == TOPIC:
            topic = ctx.broker.logs.get(r.resource_name)
            if topic is None:
                entry.update(
                    error_code=ErrorCode.unknown_topic_or_partition,
                    error_message=f"topic {r.resource_name!r} does not exist",
                    configs=[],
                )
                results.append(entry)
                continue
            registry = ctx.broker.logs.configs
            assert topic.config is not None
            configs = []
            for name in sorted(registry.names()):
                if keys is not None and name not in keys:
                    continue
                d = registry.defs[name]
                overridden = name in topic.config.overrides
                configs.append(
                    {
                        "name": name,
                        "value": None if d.sensitive else topic.config.get(name),
                        "read_only": False,
                        "config_source": _SOURCE_TOPIC if overridden else _SOURCE_DEFAULT,
                        "is_default": not overridden,
                        "is_sensitive": d.sensitive,
                        "config_type": _TYPES.get(d.type, 2),
                        "documentation": d.doc if include_docs else None,
                    }
                )
            entry["configs"] = configs
        elif r.resource_type == BROKER:
            if r.resource_name not in ("", str(ctx.broker.config.node_id)):
                entry.update(
                    error_code=ErrorCode.invalid_request,
                    error_message=f"unknown broker {r.resource_name!r}",
                    configs=[],
                )
                results.append(entry)
                continue
            entry["configs"] = [
                {
                    "name": k,
                    "value": v,
                    "read_only": True,
                    "config_source": _SOURCE_STATIC_BROKER,
                    "is_default": False,
                    "is_sensitive": False,
                    "config_type": 2,
                }
                for k, v in sorted(_broker_configs(ctx).items())
                if keys is None or k in keys
            ]
        else:
            entry.update(
                error_code=ErrorCode.invalid_request,
                error_message=f"resource type {r.resource_type} is not supported",
                configs=[],
            )
        results.append(entry)
    return {"throttle_time": 0, "results": results}


async def _apply(
    ctx: RequestContext, r: Any, new: dict[str, str], validate_only: bool
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "error_code": 0,
        "resource_type": r.resource_type,
        "resource_name": r.resource_name,
    }
    try:
        await ctx.broker.logs.set_configs(r.resource_name, new, validate_only=validate_only)
    except KafkaError as exc:
        entry.update(error_code=exc.error_code, error_message=exc.message or str(exc))
    return entry


def _not_topic(r: Any) -> dict[str, Any] | None:
    if r.resource_type == TOPIC:
        return None
    msg = (
        "dynamic broker configs are not supported"
        if r.resource_type == BROKER
        else f"resource type {r.resource_type} is not supported"
    )
    return {
        "error_code": ErrorCode.invalid_request,
        "error_message": msg,
        "resource_type": r.resource_type,
        "resource_name": r.resource_name,
    }


async def handle_alter(ctx: RequestContext, request: Any) -> dict[str, Any]:
    out = []
    for r in request.resources:
        bad = _not_topic(r)
        if bad is not None:
            out.append(bad)
            continue
        new = {c.name: c.value for c in r.configs if c.value is not None}
        out.append(await _apply(ctx, r, new, bool(request.validate_only)))
    return {"throttle_time": 0, "responses": out}


async def handle_incremental_alter(ctx: RequestContext, request: Any) -> dict[str, Any]:
    out = []
    for r in request.resources:
        bad = _not_topic(r)
        if bad is not None:
            out.append(bad)
            continue
        topic = ctx.broker.logs.get(r.resource_name)
        if topic is None:
            out.append(
                {
                    "error_code": ErrorCode.unknown_topic_or_partition,
                    "resource_type": r.resource_type,
                    "resource_name": r.resource_name,
                    "error_message": f"topic {r.resource_name!r} does not exist",
                }
            )
            continue
        assert topic.config is not None
        registry = ctx.broker.logs.configs
        new = dict(topic.config.overrides)
        error: dict[str, Any] | None = None
        for c in r.configs:
            name = registry.canonical(c.name)
            op = int(c.config_operation)
            if op == _SET:
                if c.value is None:
                    error = {
                        "error_code": ErrorCode.invalid_request,
                        "error_message": f"no value for {c.name}",
                    }
                    break
                new[name] = c.value
            elif op == _DELETE:
                new.pop(name, None)
            elif op in (_APPEND, _SUBTRACT):
                d = registry.defs.get(name)
                if d is None or d.type != "list":
                    error = {
                        "error_code": ErrorCode.invalid_config,
                        "error_message": f"{c.name} is not a list config; APPEND/SUBTRACT need one",
                    }
                    break
                current = [v for v in (topic.config.get(name) or "").split(",") if v]
                items = [v for v in (c.value or "").split(",") if v]
                if op == _APPEND:
                    current += [v for v in items if v not in current]
                else:
                    current = [v for v in current if v not in items]
                new[name] = ",".join(current)
            else:
                error = {
                    "error_code": ErrorCode.invalid_request,
                    "error_message": f"unknown operation {op}",
                }
                break
        if error is not None:
            error.update(resource_type=r.resource_type, resource_name=r.resource_name)
            out.append(error)
            continue
        out.append(await _apply(ctx, r, new, bool(request.validate_only)))
    return {"throttle_time": 0, "responses": out}
