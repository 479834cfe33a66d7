"""What every handler module shares: the request context and the API spec."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ingest.broker import Broker

__all__ = ["RequestContext", "ApiSpec", "Handler"]


@dataclass(frozen=True, slots=True)
class RequestContext:
    broker: Broker
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str

    def response(self, values: dict[str, Any]) -> Any:
        """Build this API's response entity, at the request's version."""
        from ingest.protocol.codec import build, response_class

        return build(response_class(self.api_key, self.api_version), values)


# A handler returns the response mapping (built into the versioned entity by
# the dispatcher), or None when the request has no response (acks=0).
Handler = Callable[[RequestContext, Any], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    no_response: Callable[[Any], bool] | None = None  # e.g. Produce with acks=0
