"""What every handler module shares: the request context and the API spec."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ingest.broker import Broker
    from ingest.security.sasl import SecuritySession

__all__ = ["RequestContext", "ApiSpec", "Handler"]


@dataclass(frozen=True, slots=True)
class RequestContext:
    broker: Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    session: SecuritySession | None = None  # the connection's security state
    # the connection's lock that keeps its produce appends in arrival order
    produce_order: asyncio.Lock | None = None

    def response(self, values: dict[str, Any]) -> Any:
        """Build this API's response entity, at the request's version."""
        from ingest.protocol.codec import build, response_class

        return build(response_class(self.api_key, self.api_version), values)


# A handler takes the typed kio request of any version it serves and returns
# a typed kio response entity (the dispatcher narrows it to the request's
# version), or None when the request has no response (Produce acks=0).
Handler = Callable[[RequestContext, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    no_response: Callable[[Any], bool] | None = None  # e.g. Produce with acks=0
    # served between brokers only (Envelope): not advertised to clients in
    # ApiVersions, as Kafka lists it only where brokers forward to each other
    internal: bool = False
