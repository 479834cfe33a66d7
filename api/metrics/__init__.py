"""Prometheus metrics of one platform process (``/metrics``).

Every platform process gets its own :class:`prometheus_client.CollectorRegistry`
(never the global default one), so tests that run several platforms in one
interpreter do not clash. Most figures are read from the parts' own counters
at scrape time (custom collectors: no cost on the hot paths); request latency
histograms are observed per Kafka API (a dispatcher observer) and per HTTP
route (an ASGI middleware).
"""

from api.metrics.platform import PlatformMetrics

__all__ = ["PlatformMetrics"]
