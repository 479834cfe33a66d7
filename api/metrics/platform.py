"""One process's metrics: its own registry, collectors and request observers."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, disable_created_metrics, generate_latest

from api.cluster_reads import cluster_reads
from api.metrics.collectors import (
    BrokerCollector,
    GroupLagCollector,
    StorageCollector,
    TableTopicCollector,
)
from api.metrics.http import HttpLatency
from api.metrics.kafka import KafkaRequestMetrics
from api.metrics.lag import group_lags
from api.metrics.loop import LoopLagMonitor
from api.metrics.otlp import OtlpPusher
from api.metrics.racks import RackTrafficCollector

if TYPE_CHECKING:
    from ingest.broker import Broker

__all__ = ["PlatformMetrics", "CONTENT_TYPE"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
log = logging.getLogger(__name__)


class PlatformMetrics:
    """The metrics of one platform process. Build it before the broker starts
    (so the dispatcher sees the observer) and render with :meth:`scrape`."""

    def __init__(
        self, broker: Broker, table_status: Callable[[], list[dict[str, Any]]] | None
    ) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # no *_created series
        self.registry = CollectorRegistry(auto_describe=False)
        self._broker = broker
        self._reads = cluster_reads(broker)
        self._topic_ids: dict[Any, str] = {}
        self.kafka = KafkaRequestMetrics(self.registry, self._topic_name)
        self.http = HttpLatency(self.registry)
        self.groups = GroupLagCollector()
        self.loop_lag = LoopLagMonitor(self.registry)  # started with the process
        self.registry.register(BrokerCollector(broker))
        self.registry.register(StorageCollector(broker.engine))
        self.registry.register(RackTrafficCollector(broker))
        if table_status is not None:
            self.registry.register(TableTopicCollector(table_status))
        self.registry.register(self.groups)
        broker.request_observer = self.kafka.observe

    def _topic_name(self, topic_id: Any) -> str | None:
        name = self._topic_ids.get(topic_id)
        if name is None:
            self._topic_ids = {t.topic_id: n for n, t in self._broker.logs.topics.items()}
            name = self._topic_ids.get(topic_id)
        return name

    async def refresh(self) -> None:
        """Re-read what collectors cannot read synchronously (consumer group lag)."""
        try:
            self.groups.latest = await group_lags(self._broker, self._reads)
        except Exception as exc:  # noqa: BLE001 - stale lag beats no metrics
            log.warning("consumer group lag not refreshed: %s", exc)

    async def scrape(self) -> bytes:
        """The exposition text (runs on the event loop, which owns the state read)."""
        await self.refresh()
        return generate_latest(self.registry)

    def otlp_pusher(self, endpoint: str, interval_s: float) -> OtlpPusher:
        """A pusher of these metrics to an OTLP/HTTP endpoint (start it on the loop)."""
        resource = {
            "service.name": "tidelake",
            "service.instance.id": str(self._broker.config.node_id),
        }
        return OtlpPusher(self.registry, endpoint, interval_s, resource, refresh=self.refresh)
