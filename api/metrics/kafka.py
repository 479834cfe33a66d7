"""Kafka request metrics: latency per API, bytes and records in/out per
partition, Produce/Fetch errors by code. Fed by the dispatcher's observer."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

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


class _PartitionTotals(Collector):
    """Bytes and records per partition as two counter families, kept as plain
    ints and turned into samples only when scraped: a prometheus_client
    counter takes a lock per increment, and a Produce request added two per
    partition to the event loop's path (KafkaRequestMetrics.observe was 6 %
    of the loop's time at 20 MB/s, py-spy --gil)."""

    def __init__(
        self, registry: CollectorRegistry, names: tuple[str, str], docs: tuple[str, str]
    ) -> None:
        self._names, self._docs = names, docs
        self.totals: dict[tuple[str, int], list[int]] = {}  # (topic, partition) -> [bytes, records]
        registry.register(self)

    def add(self, topic: str, partition: int, nbytes: int, records: int) -> None:
        found = self.totals.get((topic, partition))
        if found is None:
            self.totals[(topic, partition)] = [nbytes, records]
        else:
            found[0] += nbytes
            found[1] += records

    def describe(self) -> Iterator[CounterMetricFamily]:
        return self._families({})

    def collect(self) -> Iterator[CounterMetricFamily]:
        return self._families(self.totals)

    def _families(self, totals: dict[tuple[str, int], list[int]]) -> Iterator[CounterMetricFamily]:
        labels = ["topic", "partition"]
        nbytes = CounterMetricFamily(self._names[0], self._docs[0], labels=labels)
        records = CounterMetricFamily(self._names[1], self._docs[1], labels=labels)
        for (topic, partition), (b, r) in list(totals.items()):
            nbytes.add_metric([topic, str(partition)], b)
            records.add_metric([topic, str(partition)], r)
        yield nbytes
        yield records


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
        self._latency_children: dict[int, Any] = {}
        self.traffic_in = _PartitionTotals(
            registry,
            ("tidelake_topic_bytes_in", "tidelake_topic_records_in"),
            ("Record batch bytes produced (accepted).", "Records produced (accepted)."),
        )
        self.traffic_out = _PartitionTotals(
            registry,
            ("tidelake_topic_bytes_out", "tidelake_topic_records_out"),
            (
                "Record batch bytes returned to fetchers (consumers and followers).",
                "Records returned to fetchers.",
            ),
        )

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
                self.traffic_in.add(t.name, int(p.index), nbytes, count)

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
                    self.traffic_out.add(topic, int(p.partition_index), nbytes, count)
