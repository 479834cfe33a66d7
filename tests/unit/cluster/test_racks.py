"""Which broker a rack-aware consumer reads a partition from (KIP-392), and
the rack a producer announces in its client.id."""

from __future__ import annotations

from ingest.cluster.racks import RackTraffic, client_id_rack, preferred_read_replica
from ingest.cluster.view import BrokerEndpoint


def _brokers(*racks: str | None) -> list[BrokerEndpoint]:
    return [BrokerEndpoint(i + 1, "127.0.0.1", 9000 + i, r) for i, r in enumerate(racks)]


BROKERS = _brokers("a", "a", "b", "b")  # nodes 1, 2 in a; 3, 4 in b


def test_no_rack_from_the_client_reads_from_the_leader() -> None:
    assert preferred_read_replica("t", 0, None, 1, BROKERS) is None
    assert preferred_read_replica("t", 0, "", 1, BROKERS) is None


def test_a_leader_in_the_clients_rack_serves_it_itself() -> None:
    for p in range(20):
        assert preferred_read_replica("t", p, "a", 1, BROKERS) is None
        assert preferred_read_replica("t", p, "b", 4, BROKERS) is None


def test_no_live_broker_in_the_clients_rack_reads_from_the_leader() -> None:
    assert preferred_read_replica("t", 0, "c", 1, BROKERS) is None
    assert preferred_read_replica("t", 0, "b", 1, _brokers("a", "a")) is None


def test_a_client_in_another_rack_gets_a_broker_of_its_rack() -> None:
    chosen = {preferred_read_replica("t", p, "b", 1, BROKERS) for p in range(50)}
    assert chosen == {3, 4}  # spread over the rack's brokers
    chosen = {preferred_read_replica("t", p, "a", 3, BROKERS) for p in range(50)}
    assert chosen == {1, 2}


def test_the_choice_is_the_same_on_every_broker_whatever_the_order() -> None:
    for p in range(30):
        once = preferred_read_replica("orders", p, "b", 2, BROKERS)
        again = preferred_read_replica("orders", p, "b", 2, list(reversed(BROKERS)))
        assert once == again is not None


def test_a_dead_replica_is_never_chosen() -> None:
    live = [b for b in BROKERS if b.node_id != 3]
    assert {preferred_read_replica("t", p, "b", 1, live) for p in range(20)} == {4}


def test_brokers_without_a_rack_are_never_chosen() -> None:
    assert preferred_read_replica("t", 0, "b", 1, _brokers("a", None, None)) is None


def test_client_id_rack_convention() -> None:
    assert client_id_rack("orders,tidelake_rack=eu-1a") == "eu-1a"
    assert client_id_rack("tidelake_rack=b") == "b"
    assert client_id_rack("svc;tidelake_rack=b;x=1") == "b"
    assert client_id_rack("svc&tidelake_rack=us-east-1c") == "us-east-1c"
    assert client_id_rack("rdkafka") == ""
    assert client_id_rack(None) == ""
    assert client_id_rack("my_tidelake_rack=b") == ""  # not the key itself
    assert client_id_rack("svc,tidelake_rack=") == ""


def test_rack_traffic_adds_per_rack_and_direction() -> None:
    t = RackTraffic()
    t.add("a", "fetch", 10)
    t.add("a", "fetch", 5)
    t.add("", "produce", 7)
    t.add("b", "fetch", 0)
    assert t.totals() == {("a", "fetch"): 15, ("", "produce"): 7}
