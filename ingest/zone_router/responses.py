"""Produce v11 responses of routed partitions: built, encoded, decoded, merged."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence

from kio.schema.produce.v11.response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from ingest.protocol.codec import decode_response, encode_response
from ingest.protocol.errors import ErrorCode

__all__ = ["PartitionResult", "decode", "encode", "failed", "merge", "results_of", "throttle_ms"]

_PRODUCE, _VERSION = 0, 11

PartitionResult = tuple[str, PartitionProduceResponse]


def failed(index: int, code: ErrorCode, message: str) -> PartitionProduceResponse:
    return PartitionProduceResponse(
        index=i32(index),
        error_code=code,
        base_offset=i64(-1),
        log_append_time=None,
        log_start_offset=i64(-1),
        record_errors=(),
        error_message=message,
    )


def encode(response: ProduceResponse) -> bytes:
    return encode_response(_PRODUCE, _VERSION, 0, response)[4:]


def decode(data: bytes) -> ProduceResponse:
    _, response = decode_response(_PRODUCE, _VERSION, data)
    assert isinstance(response, ProduceResponse)
    return response


def results_of(response: ProduceResponse) -> list[PartitionResult]:
    return [(str(t.name), p) for t in response.responses for p in t.partition_responses]


def throttle_ms(response: ProduceResponse) -> int:
    return int(response.throttle_time.total_seconds() * 1000)


def merge(
    order: Sequence[tuple[str, int]], results: Iterable[PartitionResult], throttle: int
) -> ProduceResponse:
    """One response with a result for every (topic, partition) of ``order``,
    grouped by topic in request order; a partition without a result gets
    UNKNOWN_SERVER_ERROR."""
    by_key = {(topic, int(p.index)): p for topic, p in results}
    topics: dict[str, list[PartitionProduceResponse]] = {}
    for topic, index in order:
        got = by_key.get((topic, index))
        if got is None:
            got = failed(index, ErrorCode.unknown_server_error, "no answer for the partition")
        topics.setdefault(topic, []).append(got)
    return ProduceResponse(
        responses=tuple(
            TopicProduceResponse(name=TopicName(t), partition_responses=tuple(ps))
            for t, ps in topics.items()
        ),
        throttle_time=i32Timedelta.parse(datetime.timedelta(milliseconds=throttle)),
    )
