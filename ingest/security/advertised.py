"""What a request on a non-default listener is told about brokers.

Clients connect to the brokers that Metadata, FindCoordinator and
DescribeCluster name, so a client on the SASL_SSL listener must be given
this broker's SASL_SSL address, not the default listener's. A
:class:`ListenerView` answers like the broker's cluster view with this
broker's endpoint replaced by the listener's advertised one; a
:class:`ListenerBroker` is the broker as that listener's handlers see it.

In a cluster, :meth:`ListenerView.brokers` names the other brokers by the
address they registered (their default listener's) and carries every
listener they registered; the handlers that answer with addresses pick the
request's listener from those (:mod:`ingest.handlers.endpoints`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ingest.cluster.view import BrokerEndpoint, ClusterView

__all__ = ["ListenerBroker", "ListenerView"]


class ListenerView:
    def __init__(self, inner: Callable[[], ClusterView], host: str, port: Callable[[], int]):
        self._inner = inner
        self._host = host
        self._port = port

    def _mine(self, e: BrokerEndpoint) -> BrokerEndpoint:
        if e.node_id != self._inner().node_id:
            return e
        return BrokerEndpoint(e.node_id, self._host, self._port(), e.rack)

    @property
    def node_id(self) -> int:
        return self._inner().node_id

    @property
    def clustered(self) -> bool:
        return self._inner().clustered

    def brokers(self) -> Sequence[BrokerEndpoint]:
        return [self._mine(e) for e in self._inner().brokers()]

    def controller_id(self) -> int:
        return self._inner().controller_id()

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        return self._inner().leader(topic, partition)

    def coordinator_for(self, group: str) -> BrokerEndpoint:
        return self._mine(self._inner().coordinator_for(group))


class ListenerBroker:
    """The broker with ``cluster`` seen through a listener; every other
    attribute is the broker's own."""

    def __init__(self, broker: Any, view: ListenerView) -> None:
        self._broker = broker
        self.cluster = view

    def __getattr__(self, name: str) -> Any:
        return getattr(self._broker, name)
