"""Broker addresses as the listener a request came in on knows them.

A broker advertises one address per listener (Kafka's
``advertised.listeners``), and in a cluster every broker registers all of its
listeners. A client is always sent to the same listener name it used to
reach the broker answering it: a client on ``SASL_SSL`` gets every broker's
``SASL_SSL`` address, never another listener's (wrong port, wrong protocol).
A broker without that listener is left out, as Kafka leaves it out.
"""

from __future__ import annotations

from ingest.cluster.view import BrokerEndpoint, brokers_on
from ingest.handlers.base import RequestContext

__all__ = ["request_listener", "brokers_seen", "endpoint_seen"]


def request_listener(ctx: RequestContext) -> str | None:
    """The name of the listener the request's connection came in on (None
    when the connection carries no security state, e.g. in unit tests)."""
    session = ctx.session
    return session.listener.name if session is not None else None


def brokers_seen(ctx: RequestContext) -> list[BrokerEndpoint]:
    """The live brokers that have the request's listener, at its address."""
    return brokers_on(ctx.broker.cluster.brokers(), request_listener(ctx))


def endpoint_seen(ctx: RequestContext, node_id: int) -> BrokerEndpoint | None:
    """Broker ``node_id`` at the request's listener, or None when it is not
    live or has no such listener."""
    for b in ctx.broker.cluster.brokers():
        if b.node_id == node_id:
            return b.on(request_listener(ctx))
    return None
