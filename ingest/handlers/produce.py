"""Produce (key 0): append record batches; acks 0, 1 and all.

Every partition's append is issued synchronously, in request order, before
the handler first awaits; the response waits until the appends are durable
(fsync'd in the WAL) — for acks=1 as well as acks=all, since the WAL's group
commit makes that cheap.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from ingest.handlers.base import RequestContext
from ingest.protocol.errors import ErrorCode, error_class

__all__ = ["handle", "no_response"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_BACKPRESSURE_THROTTLE_MS = 1000


def no_response(request: Any) -> bool:
    return int(request.acks) == 0


async def handle(ctx: RequestContext, request: Any) -> dict[str, Any] | None:
    logs = ctx.broker.logs
    acks = int(request.acks)
    results: list[tuple[str, list[dict[str, Any]]]] = []
    waits: list[tuple[dict[str, Any], Any]] = []
    throttle_ms = 0
    upfront: tuple[ErrorCode, str] | None = None
    if acks not in (0, 1, -1):
        upfront = (ErrorCode.invalid_required_acks, f"acks must be 0, 1 or -1, got {acks}")
    elif request.transactional_id is not None:
        upfront = (
            ErrorCode.transactional_id_authorization_failed,
            "transactions are not supported yet",
        )
    if upfront is not None:
        for t in request.topic_data:
            results.append((t.name, [_error(p.index, *upfront) for p in t.partition_data]))
    for t in request.topic_data if upfront is None else ():
        parts: list[dict[str, Any]] = []
        for p in t.partition_data:
            log = logs.partition(t.name, p.index)
            if log is None:
                parts.append(_error(p.index, ErrorCode.unknown_topic_or_partition, None))
                continue
            if p.records is None:
                parts.append(_error(p.index, ErrorCode.invalid_record, "no records"))
                continue
            out = log.append(p.records)
            entry: dict[str, Any] = {
                "index": p.index,
                "error_code": out.error,
                "base_offset": out.base_offset,
                "log_start_offset": out.log_start_offset,
                "error_message": out.message,
            }
            if out.log_append_time >= 0:
                entry["log_append_time"] = out.log_append_time
            parts.append(entry)
            if out.throttled:
                throttle_ms = _BACKPRESSURE_THROTTLE_MS
            if out.durable is not None:
                waits.append((entry, out.durable))
        results.append((t.name, parts))
    if acks == 0:
        # Nobody hears back; a failure is raised so that the dispatcher closes
        # the connection, which is how Kafka tells an acks=0 producer.
        for _entry, durable in waits:
            await durable
        for name, parts in results:
            for part in parts:
                if part["error_code"] != ErrorCode.none:
                    raise error_class(part["error_code"])(
                        f"acks=0 produce to {name}-{part['index']} failed: {part.get('error_message')}"
                    )
        return None
    if waits:
        done = await asyncio.gather(*(w for _, w in waits), return_exceptions=True)
        for (entry, _), res in zip(waits, done, strict=True):
            if isinstance(res, BaseException):
                entry["error_code"] = ErrorCode.kafka_storage_error
                entry["error_message"] = f"append failed: {res}"
                entry["base_offset"] = -1
    return _response(results, throttle_ms)


def _error(index: int, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"index": index, "error_code": code, "base_offset": -1, "error_message": message}


def _response(
    results: list[tuple[str, list[dict[str, Any]]]], throttle_ms: int = 0
) -> dict[str, Any]:
    return {
        "responses": [{"name": name, "partition_responses": parts} for name, parts in results],
        "throttle_time": throttle_ms,
    }
