"""Latency of HTTP requests by service and route: an ASGI middleware."""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HttpLatency", "HttpLatencyMiddleware"]

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class HttpLatency:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.histogram = Histogram(
            "tidelake_http_request_seconds",
            "HTTP requests by service (api, catalog, registry), method, route and status.",
            ["service", "method", "route", "status"],
            buckets=_BUCKETS,
            registry=registry,
        )

    def middleware(self, service: Callable[[str], str]) -> Callable[[ASGIApp], ASGIApp]:
        """A middleware factory for ``app.add_middleware``; ``service`` names
        the service of a request path."""

        def build(app: ASGIApp) -> ASGIApp:
            return HttpLatencyMiddleware(app, self.histogram, service)

        return build


class HttpLatencyMiddleware:
    def __init__(self, app: ASGIApp, histogram: Histogram, service: Callable[[str], str]) -> None:
        self.app = app
        self.histogram = histogram
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.histogram.labels(
                self.service(scope.get("path", "")), scope["method"], template, str(status[0])
            ).observe(time.perf_counter() - started)
