"""A listener's clients are told that listener's address for this broker."""

from __future__ import annotations

from collections.abc import Sequence

from ingest.cluster.view import BrokerEndpoint
from ingest.security.advertised import ListenerBroker, ListenerView


class _Cluster:
    node_id = 2
    clustered = True

    def brokers(self) -> Sequence[BrokerEndpoint]:
        return [BrokerEndpoint(1, "b1", 9092, "az1"), BrokerEndpoint(2, "b2", 9092, "az2")]

    def controller_id(self) -> int:
        return 1

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        return partition % 2 + 1, 7

    def coordinator_for(self, group: str) -> BrokerEndpoint:
        return self.brokers()[0 if group == "g1" else 1]


def test_only_this_brokers_endpoint_is_replaced() -> None:
    view = ListenerView(_Cluster, "secure.b2", lambda: 9094)
    assert list(view.brokers()) == [
        BrokerEndpoint(1, "b1", 9092, "az1"),
        BrokerEndpoint(2, "secure.b2", 9094, "az2"),
    ]
    assert view.coordinator_for("g1") == BrokerEndpoint(1, "b1", 9092, "az1")
    assert view.coordinator_for("g2") == BrokerEndpoint(2, "secure.b2", 9094, "az2")
    assert (view.node_id, view.clustered, view.controller_id()) == (2, True, 1)
    assert view.leader("t", 0) == (1, 7)


def test_the_listener_broker_is_the_broker_with_that_view() -> None:
    class _Broker:
        cluster = _Cluster()
        cluster_id = "abc"

    view = ListenerView(lambda: _Broker.cluster, "h", lambda: 1)
    seen = ListenerBroker(_Broker(), view)
    assert seen.cluster is view and seen.cluster_id == "abc"
