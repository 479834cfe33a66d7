"""Fetch (key 1): long-poll reads bounded by max wait, min bytes and max bytes.

Reads stop at the high watermark (the durable end), so a consumer never sees a
record that a crash could take back. isolation_level READ_COMMITTED is
honoured: with no transactions, the last stable offset is the high watermark.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ingest.handlers.base import RequestContext
from ingest.log.partition import PartitionLog
from ingest.protocol.errors import ErrorCode

__all__ = ["handle"]


async def handle(ctx: RequestContext, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    max_wait_s = min(request.max_wait.total_seconds(), broker.config.fetch_max_wait_cap_ms / 1000)
    min_bytes = max(0, int(request.min_bytes))
    max_bytes = int(getattr(request, "max_bytes", 0x7FFFFFFF))
    if max_bytes <= 0:
        max_bytes = 0x7FFFFFFF
    deadline = time.monotonic() + max_wait_s
    wanted: list[tuple[str, int, int, int]] = []
    for t in request.topics:
        for p in t.partitions:
            wanted.append((t.topic, p.partition, p.fetch_offset, p.partition_max_bytes))
    while True:
        total, topics, logs = await _read_all(ctx, wanted, max_bytes)
        remaining = deadline - time.monotonic()
        if total >= min_bytes or remaining <= 0 or not logs or _any_error(topics):
            break
        waiters = [log.wait_for_data() for log in logs]
        try:
            await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()
    return {
        "throttle_time": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [{"topic": name, "partitions": parts} for name, parts in topics.items()],
    }


def _any_error(topics: dict[str, list[dict[str, Any]]]) -> bool:
    return any(p["error_code"] != ErrorCode.none for parts in topics.values() for p in parts)


async def _read_all(
    ctx: RequestContext, wanted: list[tuple[str, int, int, int]], max_bytes: int
) -> tuple[int, dict[str, list[dict[str, Any]]], list[PartitionLog]]:
    logs_mgr = ctx.broker.logs
    topics: dict[str, list[dict[str, Any]]] = {}
    logs: list[PartitionLog] = []
    total = 0
    budget = max_bytes
    for topic, partition, offset, part_max in wanted:
        parts = topics.setdefault(topic, [])
        log = logs_mgr.partition(topic, partition)
        if log is None:
            parts.append(
                {
                    "partition_index": partition,
                    "error_code": ErrorCode.unknown_topic_or_partition,
                    "high_watermark": -1,
                    "last_stable_offset": -1,
                    "log_start_offset": -1,
                    "records": b"",
                }
            )
            continue
        logs.append(log)
        limit = min(part_max, budget) if budget > 0 else 0
        if limit <= 0 and total > 0:
            res_records: bytes | None = b""
            hw, start, err = log.high_watermark, log.log_start_offset, ErrorCode.none
        else:
            res = await log.read(offset, max(limit, 1))
            res_records, hw, start, err = (
                res.records,
                res.high_watermark,
                res.log_start_offset,
                res.error,
            )
        size = len(res_records) if res_records else 0
        total += size
        budget -= size
        parts.append(
            {
                "partition_index": partition,
                "error_code": err,
                "high_watermark": hw,
                "last_stable_offset": hw,
                "log_start_offset": start,
                # Kafka sends empty (never null) records, even with an error:
                # librdkafka rejects a null record set as a bad message.
                "records": res_records if res_records is not None else b"",
            }
        )
    return total, topics, logs
