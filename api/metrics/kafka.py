"""Kafka request metrics: latency per API, bytes and records in/out per
partition, Produce/Fetch errors by code. Fed by the dispatcher's observer."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from ingest.protocol.errors import ErrorCode
from ingest.s3stream.latency import FINE_BUCKETS

__all__ = ["KafkaRequestMetrics", "LATENCY_BUCKETS"]

# sub-millisecond steps where a produce lives (its p99 target is 3 ms), up
# to the seconds a long-polling fetch or a group join waits
LATENCY_BUCKETS = (*FINE_BUCKETS, 5.0, 10.0)
_PRODUCE, _FETCH = 0, 1
_HEADER_SIZE = 61  # a v2 record batch header
_INT32 = struct.Struct(">i")


def _api_names() -> dict[int, str]:
    from ingest.handlers import api_table

    return {key: spec.name for key, spec in api_table().items()}


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def _batches(records: Any) -> tuple[int, int]:
    """(bytes, records) of a record set, from its v2 batch headers only (base
    offset 8 bytes, length 4, ... records count at byte 57); a trailing partial
    batch (fetch responses may end with one) adds its bytes but no records."""
    if not records:
        return 0, 0
    size = len(records)
    pos = count = 0
    while pos + _HEADER_SIZE <= size:
        (length,) = _INT32.unpack_from(records, pos + 8)
        (n,) = _INT32.unpack_from(records, pos + 57)
        pos += 12 + length
        if pos > size or length <= 0:
            break
        count += max(n, 0)
    return size, count


class KafkaRequestMetrics:
    def __init__(
        self, registry: CollectorRegistry, topic_name: Callable[[Any], str | None]
    ) -> None:
        self._names = _api_names()
        self._topic_name = topic_name  # Fetch v13+ names topics by id
        self.latency = Histogram(
            "tidelake_kafka_request_seconds",
            "Time from a decoded Kafka request to its response entity, by API.",
            ["api"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.errors = Counter(
            "tidelake_kafka_partition_errors",
            "Partitions answered with an error in Produce and Fetch responses, by error code.",
            ["api", "error"],
            registry=registry,
        )
        labels = ["topic", "partition"]
        self._in: dict[tuple[str, int], tuple[Counter, Counter]] = {}
        self._out: dict[tuple[str, int], tuple[Counter, Counter]] = {}
        self._latency_children: dict[int, Any] = {}
        self.bytes_in = Counter(
            "tidelake_topic_bytes_in",
            "Record batch bytes produced (accepted).",
            labels,
            registry=registry,
        )
        self.records_in = Counter(
            "tidelake_topic_records_in", "Records produced (accepted).", labels, registry=registry
        )
        self.bytes_out = Counter(
            "tidelake_topic_bytes_out",
            "Record batch bytes returned to fetchers (consumers and followers).",
            labels,
            registry=registry,
        )
        self.records_out = Counter(
            "tidelake_topic_records_out",
            "Records returned to fetchers.",
            labels,
            registry=registry,
        )

    @staticmethod
    def _children(
        cache: dict[tuple[str, int], tuple[Counter, Counter]],
        nbytes: Counter,
        records: Counter,
        topic: str,
        partition: int,
    ) -> tuple[Counter, Counter]:
        """The (bytes, records) counters of one partition, looked up once."""
        found = cache.get((topic, partition))
        if found is None:
            found = (nbytes.labels(topic, str(partition)), records.labels(topic, str(partition)))
            cache[(topic, partition)] = found
        return found

    def observe(self, api_key: int, seconds: float, request: Any, response: Any) -> None:
        """The dispatcher's observer: cheap, never raises."""
        try:
            child = self._latency_children.get(api_key)
            if child is None:
                child = self.latency.labels(self._names.get(api_key, str(api_key)))
                self._latency_children[api_key] = child
            child.observe(seconds)
            if api_key == _PRODUCE:
                self._produce(request, response)
            elif api_key == _FETCH:
                self._fetch(request, response)
        except Exception:  # noqa: BLE001, S110 - metrics must never break a request
            pass

    def _produce(self, request: Any, response: Any) -> None:
        sent = {(t.name, p.index): p.records for t in request.topic_data for p in t.partition_data}
        for t in response.responses:
            for p in t.partition_responses:
                code = int(p.error_code)
                if code:
                    self.errors.labels("Produce", _error_name(code)).inc()
                    continue
                nbytes, count = _batches(sent.get((t.name, p.index)))
                b, r = self._children(self._in, self.bytes_in, self.records_in, t.name, p.index)
                b.inc(nbytes)
                r.inc(count)

    def _fetch(self, request: Any, response: Any) -> None:
        del request
        for t in response.responses:
            topic = getattr(t, "topic", None)
            if topic is None:
                topic = self._topic_name(t.topic_id) or str(t.topic_id)
            for p in t.partitions:
                code = int(p.error_code)
                if code:
                    self.errors.labels("Fetch", _error_name(code)).inc()
                    continue
                nbytes, count = _batches(p.records)
                if nbytes:
                    b, r = self._children(
                        self._out, self.bytes_out, self.records_out, topic, p.partition_index
                    )
                    b.inc(nbytes)
                    r.inc(count)
