"""Custom collectors: read the parts' own counters at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from api.metrics.lag import PartitionLag
from ingest.s3stream.backpressure import health_of
from ingest.s3stream.latency import LatencyHistogram

if TYPE_CHECKING:
    from ingest.broker import Broker

__all__ = ["BrokerCollector", "StorageCollector", "TableTopicCollector", "GroupLagCollector"]

StatusSource = Callable[[], list[dict[str, Any]]]


class BrokerCollector(Collector):
    """Offsets of the partitions this broker holds."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def collect(self) -> Iterator[Metric]:
        hw = GaugeMetricFamily(
            "tidelake_partition_high_watermark",
            "Next offset a consumer can read.",
            labels=["topic", "partition"],
        )
        start = GaugeMetricFamily(
            "tidelake_partition_log_start_offset",
            "First retained offset.",
            labels=["topic", "partition"],
        )
        produced = CounterMetricFamily(
            "tidelake_partition_produced_bytes",
            "Record batch bytes appended to the partition since this broker opened it.",
            labels=["topic", "partition"],
        )
        fetched = CounterMetricFamily(
            "tidelake_partition_fetched_bytes",
            "Record batch bytes fetches read from the partition since this broker opened it.",
            labels=["topic", "partition"],
        )
        for name, topic in sorted(self._broker.logs.topics.items()):
            for p in topic.partitions:
                hw.add_metric([name, str(p.partition)], p.high_watermark)
                start.add_metric([name, str(p.partition)], p.log_start_offset)
                produced.add_metric([name, str(p.partition)], p.appended_bytes)
                fetched.add_metric([name, str(p.partition)], p.fetched_bytes)
        yield hw
        yield start
        yield produced
        yield fetched
        member = self._broker.member
        if member is not None:
            moves = CounterMetricFamily(
                "tidelake_cluster_balancer_moves",
                "Partition moves the balancer asked for while this broker was the controller, "
                "by what decided (traffic, count).",
                labels=["by"],
            )
            for by, n in sorted(member.balancer_moves.items()):
                moves.add_metric([by], n)
            yield moves
        cleaner = getattr(self._broker, "cleaner", None)
        if cleaner is not None:  # compacted topics' log cleaner
            yield from _counter(
                "tidelake_log_cleaner_passes",
                "Partitions the log cleaner compacted (one pass each).",
                cleaner.passes,
            )
            yield from _counter(
                "tidelake_log_cleaner_bytes",
                "Bytes the log cleaner read to rewrite compacted ranges.",
                cleaner.bytes_cleaned,
            )
        topics = GaugeMetricFamily("tidelake_topics", "Topics that exist.")
        topics.add_metric([], len(self._broker.logs.topics))
        yield topics


def _counter(name: str, doc: str, value: object) -> Iterable[Metric]:
    if isinstance(value, int | float):
        c = CounterMetricFamily(name, doc)
        c.add_metric([], value)
        yield c


def _gauge(name: str, doc: str, value: object) -> Iterable[Metric]:
    if isinstance(value, int | float):
        g = GaugeMetricFamily(name, doc)
        g.add_metric([], value)
        yield g


def _summary(name: str, doc: str, count: object, total: object) -> Iterable[Metric]:
    if isinstance(count, int) and isinstance(total, float):
        s = SummaryMetricFamily(name, doc)
        s.add_metric([], count_value=count, sum_value=total)
        yield s


def _histogram(name: str, doc: str, hist: object) -> Iterable[Metric]:
    if isinstance(hist, LatencyHistogram):
        h = HistogramMetricFamily(name, doc)
        buckets = [("+Inf" if b == float("inf") else repr(b), n) for b, n in hist.cumulative()]
        h.add_metric([], buckets=buckets, sum_value=hist.total)
        yield h


class StorageCollector(Collector):
    """The S3Stream engine: WAL, uploads, caches, compaction, object store health."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine

    def collect(self) -> Iterator[Metric]:
        e = self._engine
        p = "tidelake_storage"
        yield from _counter(f"{p}_uploads", "Uploads committed by the stream engine.", e.uploads)
        yield from _counter(
            f"{p}_uploaded_bytes", "Bytes uploaded by the stream engine.", e.uploaded_bytes
        )
        yield from _counter(
            f"{p}_objects_put",
            "Objects written to object storage.",
            getattr(e, "objects_put", None),
        )
        yield from _counter(f"{p}_compactions", "Compactions run.", getattr(e, "compactions", None))
        yield from _histogram(
            f"{p}_wal_append_seconds",
            "WAL appends: from the append to durable (fsync or object WAL put), "
            "as the event loop sees it.",
            getattr(e, "wal_append_latency", None),
        )
        yield from _histogram(
            f"{p}_wal_sync_seconds",
            "File WAL group commits: writev and fdatasync of what was queued, per commit.",
            getattr(e, "wal_sync_latency", None),
        )
        replies = getattr(e, "wal_replies_sent", None)
        if isinstance(replies, dict):
            c = CounterMetricFamily(
                f"{p}_wal_writer_replies",
                "Produce responses the file WAL's writer thread sent itself right after "
                "the fdatasync, by outcome: whole, partly (the rest written by the event "
                "loop), not (their records or the socket failed: the loop answered).",
                labels=["sent"],
            )
            for outcome, n in replies.items():
                c.add_metric([outcome], n)
            yield c
        yield from _summary(
            f"{p}_object_put_seconds",
            "Object puts of uploads.",
            getattr(e, "objects_put", None),
            getattr(e, "object_put_seconds", None),
        )
        block = getattr(e, "block_cache", None)
        if block is not None:
            hits, misses = block.hits, block.misses
            yield from _counter(f"{p}_block_cache_hits", "Block cache hits.", hits)
            yield from _counter(f"{p}_block_cache_misses", "Block cache misses.", misses)
            yield from _gauge(
                f"{p}_block_cache_hit_ratio",
                "Block cache hits / lookups since start (0 before any lookup).",
                hits / (hits + misses) if hits + misses else 0.0,
            )
            yield from _gauge(f"{p}_block_cache_bytes", "Bytes in the block cache.", block.size)
        cache = getattr(e, "log_cache", None)
        if cache is not None:
            yield from _gauge(f"{p}_log_cache_bytes", "Bytes in the log cache.", cache.size)
            hits, misses = getattr(cache, "hits", None), getattr(cache, "misses", None)
            if isinstance(hits, int) and isinstance(misses, int):
                yield from _counter(f"{p}_log_cache_hits", "Reads the log cache answered.", hits)
                yield from _counter(
                    f"{p}_log_cache_misses", "Reads that went on to object storage.", misses
                )
                yield from _gauge(
                    f"{p}_log_cache_hit_ratio",
                    "Log cache hits / reads since start (0 before any read).",
                    hits / (hits + misses) if hits + misses else 0.0,
                )
            yield from _gauge(
                f"{p}_pending_upload_bytes",
                "Appended bytes not yet uploaded.",
                cache.unuploaded_bytes,
            )
        yield from _gauge(
            f"{p}_produce_throttle_ms",
            "Throttle time produce responses should carry for object storage backpressure.",
            getattr(e, "backpressure_ms", None),
        )
        health = health_of(getattr(e, "object_store", None))
        if health is not None:
            # the health tracker keeps its own histogram; re-expose its families
            yield from text_string_to_metric_families("\n".join(health.metrics_text()) + "\n")


class TableTopicCollector(Collector):
    """Table topic status: lag, freshness, rows/s, commits, dead letters."""

    def __init__(self, status: StatusSource) -> None:
        self._status = status

    def collect(self) -> Iterator[Metric]:
        rows = self._status()
        gauges = {
            "lag": "Offsets produced but not yet committed to the table.",
            "freshness_ms": "Age of the newest record committed to the table (ms).",
            "rows_per_second": "Rows committed per second, recent average.",
            "files_per_commit": "Data files per commit, recent average.",
            "last_commit_rows": "Rows in the last commit.",
        }
        counters = {
            "rows_committed": "Rows committed to the table.",
            "commits": "Iceberg commits.",
            "dead_letters": "Records sent to the dead-letter topic.",
        }
        for key, doc in gauges.items():
            g = GaugeMetricFamily(f"tidelake_table_topic_{key}", doc, labels=["topic"])
            for row in rows:
                if isinstance(row.get(key), int | float):
                    g.add_metric([str(row["topic"])], row[key])
            yield g
        for key, doc in counters.items():
            c = CounterMetricFamily(f"tidelake_table_topic_{key}", doc, labels=["topic"])
            for row in rows:
                if isinstance(row.get(key), int | float):
                    c.add_metric([str(row["topic"])], row[key])
            yield c
        commit = SummaryMetricFamily(
            "tidelake_table_topic_commit_seconds",
            "Time spent in table commits (count: commits).",
            labels=["topic"],
        )
        for row in rows:
            total = row.get("commit_seconds_sum")
            if isinstance(total, int | float) and isinstance(row.get("commits"), int):
                commit.add_metric([str(row["topic"])], count_value=row["commits"], sum_value=total)
        yield commit
        errors = GaugeMetricFamily(
            "tidelake_table_topic_failing",
            "1 while the table topic's last attempt ended in an error.",
            labels=["topic"],
        )
        for row in rows:
            errors.add_metric([str(row["topic"])], 1 if row.get("last_error") else 0)
        yield errors


class GroupLagCollector(Collector):
    """Consumer group committed offsets and lag (refreshed before each scrape) of the
    groups this broker coordinates: in a cluster each group is exported once, by its
    coordinator, with every partition's high watermark asked of its leader."""

    def __init__(self) -> None:
        self.latest: list[PartitionLag] = []

    def collect(self) -> Iterator[Metric]:
        labels = ["group", "topic", "partition"]
        committed = GaugeMetricFamily(
            "tidelake_consumer_group_committed_offset", "Committed offset.", labels=labels
        )
        lag = GaugeMetricFamily(
            "tidelake_consumer_group_lag",
            "High watermark minus committed offset.",
            labels=labels,
        )
        for p in self.latest:
            key = [p.group, p.topic, str(p.partition)]
            committed.add_metric(key, p.committed)
            if p.lag is not None:
                lag.add_metric(key, p.lag)
        yield committed
        yield lag
