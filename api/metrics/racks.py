"""Payload bytes between clients and this broker per rack pair (issue #16's
zero cross-AZ measure): record batch bytes produced and fetched, by the
broker's rack, the client's rack and direction. A consumer's rack is its Fetch
``rack_id`` (``client.rack``); a producer's is ``tidelake_rack=<rack>`` in its
``client.id``; unknown racks are ``""``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from ingest.broker import Broker

__all__ = ["RackTrafficCollector"]


class RackTrafficCollector(Collector):
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "tidelake_rack_payload_bytes",
            "Record batch bytes between clients and this broker, by broker rack, "
            "client rack and direction (produce: from the client; fetch: to it).",
            labels=["broker_rack", "client_rack", "direction"],
        )
        broker_rack = self._broker.config.rack or ""
        for (client_rack, direction), nbytes in sorted(self._broker.rack_traffic.totals().items()):
            family.add_metric([broker_rack, client_rack, direction], nbytes)
        yield family
