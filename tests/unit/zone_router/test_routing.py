"""Which broker a producer announcing its rack is told leads a partition."""

from __future__ import annotations

from ingest.cluster.view import BrokerEndpoint
from ingest.zone_router import client_rack, leader_for_client, routed_leader, routed_leaders

BROKERS = [
    BrokerEndpoint(1, "h1", 9092, "a"),
    BrokerEndpoint(2, "h2", 9092, "a"),
    BrokerEndpoint(3, "h3", 9092, "b"),
    BrokerEndpoint(4, "h4", 9092, "b"),
]


def test_client_id_announces_rack_as_token_or_suffix() -> None:
    assert client_rack("orders;tidelake_rack=eu-1a") == "eu-1a"
    assert client_rack("tidelake_rack=eu-1b,orders") == "eu-1b"
    assert client_rack("tidelake_rack=b") == "b"
    assert client_rack("orders") == ""
    assert client_rack(None) == ""
    assert client_rack("my_tidelake_rack=x") == ""


def test_a_client_without_rack_sees_the_real_leader() -> None:
    assert routed_leader("t", 0, "", 3, BROKERS) == 3


def test_a_leader_in_the_clients_rack_is_kept() -> None:
    for p in range(20):
        assert routed_leader("t", p, "b", 3, BROKERS) == 3
        assert routed_leader("t", p, "a", 2, BROKERS) == 2


def test_a_leader_in_another_rack_is_replaced_by_a_live_broker_of_the_clients_rack() -> None:
    chosen = {routed_leader("t", p, "a", 3, BROKERS) for p in range(32)}
    assert chosen == {1, 2}  # spread over the rack's brokers, none elsewhere


def test_the_choice_is_deterministic_whatever_the_order_of_brokers() -> None:
    for p in range(16):
        assert routed_leader("t", p, "a", 4, BROKERS) == routed_leader(
            "t", p, "a", 4, list(reversed(BROKERS))
        )


def test_a_rack_without_live_brokers_or_a_leaderless_partition_keeps_the_real_answer() -> None:
    assert routed_leader("t", 0, "c", 3, BROKERS) == 3
    assert routed_leader("t", 0, "a", -1, BROKERS) == -1


def test_routed_leaders_maps_every_partition() -> None:
    leaders = {("t", 0): 1, ("t", 1): 3, ("u", 0): -1}
    out = routed_leaders("a", leaders, BROKERS)
    assert out[("t", 0)] == 1
    assert out[("t", 1)] in (1, 2)
    assert out[("u", 0)] == -1


def test_metadata_names_a_broker_of_the_client_id_rack_or_the_real_leader() -> None:
    assert leader_for_client("app", "t", 1, 3, BROKERS) == 3
    assert leader_for_client("app;tidelake_rack=b", "t", 1, 3, BROKERS) == 3
    assert leader_for_client("app;tidelake_rack=a", "t", 1, 3, BROKERS) in (1, 2)
    # a broker of the rack that Metadata does not list (no such listener) is never named
    only_b = [b for b in BROKERS if b.rack == "b"]
    assert leader_for_client("app;tidelake_rack=a", "t", 1, 3, only_b) == 3
