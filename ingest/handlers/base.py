"""What every handler module shares: the request context and the API spec."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ingest.broker import Broker
    from ingest.security.sasl import SecuritySession

__all__ = ["RequestContext", "ApiSpec", "Handler", "EagerRun", "Respond", "Early"]


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

# How an eager run hands its result back: (response entity, None) or (None, error).
Respond = Callable[[Any, "BaseException | None"], None]

# How an eager run hands its response over before its work is durable, when
# only the WAL's fsync stands between it and the client: ``early(build)``
# calls ``build()`` for the response only if the connection can lend it to
# the WAL's writer, which sends it itself right after the fsync. It returns
# None (not lent), or a probe telling later whether the lent response went
# out; ``respond`` is still called, and its answer goes out only if not.
Early = Callable[[Callable[[], Any]], "Callable[[], bool] | None"]


class EagerRun(Protocol):
    """A request an API serves without a task: its work is issued when
    ``run`` is called, synchronously, and ``respond`` is called once (maybe
    within ``run``, maybe from a later callback of the event loop). With
    ``early`` (None where the connection cannot take it), the run may also
    hand over, once, the response it will give if its appends become durable."""

    def run(self, respond: Respond, early: Early | None = None) -> None: ...


# Called as the request is framed: an EagerRun when the request can be served
# without suspending before its work is issued (the common case of the API),
# or None, and the request takes the handler, in a task.
Eager = Callable[[RequestContext, Any], "EagerRun | None"]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    no_response: Callable[[Any], bool] | None = None  # e.g. Produce with acks=0
    # the path without a task, where the API has one (Produce): see Eager
    eager: Eager | None = None
    # served between brokers only (Envelope): not advertised to clients in
    # ApiVersions, as Kafka lists it only where brokers forward to each other
    internal: bool = False
