"""A broker's endpoint per listener name, and the inter-broker listener choice."""

from __future__ import annotations

import pytest

from ingest.cluster.view import BrokerEndpoint, ListenerEndpoint, brokers_on, inter_broker_listener
from ingest.errors import ConfigError

PLAIN = ListenerEndpoint("PLAINTEXT", "10.0.0.1", 9092, "PLAINTEXT")
SECURE = ListenerEndpoint("SASL_SSL", "b1.example.com", 9094, "SASL_SSL")


def test_a_broker_is_named_at_the_listener_of_the_same_name() -> None:
    b = BrokerEndpoint(1, "10.0.0.1", 9092, "r1", (PLAIN, SECURE))
    at_secure = b.on("SASL_SSL")
    assert at_secure is not None
    assert (at_secure.node_id, at_secure.host, at_secure.port, at_secure.rack) == (
        1,
        "b1.example.com",
        9094,
        "r1",
    )
    assert b.on("PLAINTEXT") == b


def test_a_broker_without_the_listener_is_left_out() -> None:
    with_secure = BrokerEndpoint(1, "10.0.0.1", 9092, None, (PLAIN, SECURE))
    plain_only = BrokerEndpoint(2, "10.0.0.2", 9092, None, (PLAIN,))
    assert plain_only.on("SASL_SSL") is None
    assert [(b.node_id, b.port) for b in brokers_on([with_secure, plain_only], "SASL_SSL")] == [
        (1, 9094)
    ]
    assert [b.node_id for b in brokers_on([with_secure, plain_only], "PLAINTEXT")] == [1, 2]


def test_without_registered_listeners_or_a_listener_name_the_default_address_is_given() -> None:
    legacy = BrokerEndpoint(3, "h3", 9003)
    assert legacy.on("SASL_SSL") == legacy
    full = BrokerEndpoint(1, "10.0.0.1", 9092, None, (PLAIN, SECURE))
    assert full.on(None) == full


def test_inter_broker_listener_defaults_to_the_first_plaintext_one() -> None:
    listeners = [("SASL_SSL", "SASL_SSL"), ("INTERNAL", "PLAINTEXT"), ("PLAINTEXT", "PLAINTEXT")]
    assert inter_broker_listener(listeners, None) == "INTERNAL"
    assert inter_broker_listener(listeners, "plaintext") == "PLAINTEXT"
    # without a PLAINTEXT one: the default listener (PeerSecurity logs in there)
    assert inter_broker_listener([("SASL_SSL", "SASL_SSL")], None) == "SASL_SSL"


def test_an_unknown_inter_broker_listener_is_refused() -> None:
    with pytest.raises(ConfigError, match="no listener named OTHER"):
        inter_broker_listener([("PLAINTEXT", "PLAINTEXT")], "other")


def test_broker_config_names_the_key_of_an_unknown_inter_broker_listener() -> None:
    from pydantic import ValidationError

    from ingest.config import BrokerConfig

    with pytest.raises(ValidationError, match="inter_broker_listener_name"):
        BrokerConfig(inter_broker_listener_name="INTERNAL")
    ok = BrokerConfig(
        listeners=["SASL_PLAINTEXT://127.0.0.1:0", "INTERNAL://127.0.0.1:0"],
        listener_security_protocol_map={"INTERNAL": "PLAINTEXT"},
        inter_broker_listener_name="internal",
    )
    assert ok.inter_broker_listener_name == "internal"
