"""Push the registry's metrics over OTLP/HTTP (protobuf) every few seconds.

Each push converts what ``/metrics`` would show at that moment: gauges as
OTLP gauges, counters as cumulative monotonic sums, histograms as explicit
bucket histograms, summaries as summaries. Push and pull show the same figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

import httpx
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

__all__ = ["OtlpPusher", "to_otlp"]

log = logging.getLogger(__name__)
_CUMULATIVE = pb.AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE


def _attributes(labels: dict[str, str]) -> list[KeyValue]:
    return [KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in sorted(labels.items())]


def _key(labels: dict[str, str], drop: str = "le") -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in labels.items() if k != drop))


def _histogram(family: Metric, now: int) -> pb.Metric:
    points: dict[tuple[tuple[str, str], ...], dict[str, object]] = {}
    for s in family.samples:
        p = points.setdefault(_key(s.labels), {"buckets": [], "sum": 0.0, "count": 0})
        if s.name.endswith("_bucket"):
            bound = float(s.labels["le"])
            p["buckets"].append((bound, s.value))  # type: ignore[attr-defined]
        elif s.name.endswith("_sum"):
            p["sum"] = s.value
        elif s.name.endswith("_count"):
            p["count"] = int(s.value)
    out = []
    for labels, p in points.items():
        cumulative = sorted(p["buckets"])  # type: ignore[call-overload]
        counts, previous = [], 0.0
        for _, c in cumulative:
            counts.append(int(c - previous))
            previous = c
        out.append(
            pb.HistogramDataPoint(
                attributes=_attributes(dict(labels)),
                time_unix_nano=now,
                count=int(p["count"]),  # type: ignore[call-overload]
                sum=float(p["sum"]),  # type: ignore[arg-type]
                bucket_counts=counts,
                explicit_bounds=[b for b, _ in cumulative if b != float("inf")],
            )
        )
    return pb.Metric(
        name=family.name,
        description=family.documentation,
        histogram=pb.Histogram(data_points=out, aggregation_temporality=_CUMULATIVE),
    )


def _summary(family: Metric, now: int) -> pb.Metric:
    points: dict[tuple[tuple[str, str], ...], pb.SummaryDataPoint] = {}
    for s in family.samples:
        p = points.setdefault(
            _key(s.labels, "quantile"),
            pb.SummaryDataPoint(attributes=_attributes(s.labels), time_unix_nano=now),
        )
        if s.name.endswith("_sum"):
            p.sum = s.value
        elif s.name.endswith("_count"):
            p.count = int(s.value)
    return pb.Metric(
        name=family.name,
        description=family.documentation,
        summary=pb.Summary(data_points=list(points.values())),
    )


def _numbers(family: Metric, now: int, suffix: str = "") -> list[pb.NumberDataPoint]:
    return [
        pb.NumberDataPoint(attributes=_attributes(s.labels), time_unix_nano=now, as_double=s.value)
        for s in family.samples
        if s.name == family.name + suffix
    ]


def to_otlp(
    families: Iterable[Metric], resource: dict[str, str], now_ns: int | None = None
) -> ExportMetricsServiceRequest:
    """One export request holding every family."""
    now = now_ns if now_ns is not None else time.time_ns()
    metrics: list[pb.Metric] = []
    for f in families:
        if f.type == "counter":
            metrics.append(
                pb.Metric(
                    name=f.name,
                    description=f.documentation,
                    sum=pb.Sum(
                        data_points=_numbers(f, now, "_total"),
                        aggregation_temporality=_CUMULATIVE,
                        is_monotonic=True,
                    ),
                )
            )
        elif f.type == "histogram":
            metrics.append(_histogram(f, now))
        elif f.type == "summary":
            metrics.append(_summary(f, now))
        else:  # gauge, unknown, info, stateset: their current values
            metrics.append(
                pb.Metric(
                    name=f.name,
                    description=f.documentation,
                    gauge=pb.Gauge(data_points=_numbers(f, now)),
                )
            )
    return ExportMetricsServiceRequest(
        resource_metrics=[
            pb.ResourceMetrics(
                resource=Resource(attributes=_attributes(resource)),
                scope_metrics=[
                    pb.ScopeMetrics(scope=InstrumentationScope(name="tidelake"), metrics=metrics)
                ],
            )
        ]
    )


class OtlpPusher:
    """Posts ``to_otlp(registry)`` to ``<endpoint>/v1/metrics`` every ``interval_s``."""

    def __init__(
        self,
        registry: CollectorRegistry,
        endpoint: str,
        interval_s: float,
        resource: dict[str, str],
        refresh: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._registry = registry
        self.url = endpoint.rstrip("/") + "/v1/metrics"
        self._interval_s = interval_s
        self._resource = resource
        self._refresh = refresh
        self._task: asyncio.Task[None] | None = None
        self.pushed = 0
        self._failing = False

    async def push_once(self, client: httpx.AsyncClient) -> None:
        if self._refresh is not None:
            await self._refresh()
        body = to_otlp(self._registry.collect(), self._resource).SerializeToString()
        r = await client.post(
            self.url, content=body, headers={"Content-Type": "application/x-protobuf"}
        )
        r.raise_for_status()
        self.pushed += 1

    async def _run(self) -> None:
        async with httpx.AsyncClient(timeout=10) as client:
            while True:
                try:
                    await self.push_once(client)
                    if self._failing:
                        log.info("OTLP push to %s works again", self.url)
                    self._failing = False
                except Exception as exc:  # noqa: BLE001 - the next push tries again
                    if not self._failing:
                        log.warning("OTLP push to %s failed: %s", self.url, exc)
                    self._failing = True
                await asyncio.sleep(self._interval_s)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="otlp-push")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
