"""Listeners in Kafka's shape: names, protocols, advertised addresses."""

from __future__ import annotations

import pytest

from ingest.errors import ConfigError
from ingest.security import Listener, SecurityProtocol, parse_listeners


def _parse(
    listeners: list[str], advertised: tuple[str, ...] = (), mapping: dict[str, str] | None = None
) -> list[Listener]:
    return parse_listeners(
        listeners, advertised, mapping or {}, default_host="h", default_port=9092
    )


def test_without_listeners_the_broker_has_one_plaintext_listener_on_host_port() -> None:
    got = parse_listeners(
        [], [], {}, default_host="0.0.0.0", default_port=9092, advertised_host="kafka.example"
    )
    assert got == [
        Listener("PLAINTEXT", SecurityProtocol.PLAINTEXT, "0.0.0.0", 9092, "kafka.example", None)
    ]


def test_names_are_protocols_or_mapped_to_them() -> None:
    got = _parse(
        ["PLAINTEXT://127.0.0.1:9092", "internal://:9093", "SASL_SSL://[::1]:9094"],
        ["INTERNAL://broker-1.internal:19093"],
        {"INTERNAL": "ssl"},
    )
    assert got == [
        Listener("PLAINTEXT", SecurityProtocol.PLAINTEXT, "127.0.0.1", 9092),
        Listener("INTERNAL", SecurityProtocol.SSL, "", 9093, "broker-1.internal", 19093),
        Listener("SASL_SSL", SecurityProtocol.SASL_SSL, "::1", 9094),
    ]
    assert got[2].protocol.uses_sasl and got[2].protocol.uses_tls
    assert not got[1].protocol.uses_sasl and got[1].protocol.uses_tls


@pytest.mark.parametrize(
    ("listeners", "advertised", "mapping", "key"),
    [
        (["127.0.0.1:9092"], [], {}, "listeners"),
        (["PLAINTEXT://127.0.0.1:x"], [], {}, "listeners"),
        (["CLIENT://127.0.0.1:9092"], [], {}, "listener_security_protocol_map"),
        (["CLIENT://127.0.0.1:9092"], [], {"CLIENT": "KERBEROS"}, "listener_security_protocol_map"),
        (["PLAINTEXT://a:1", "PLAINTEXT://a:2"], [], {}, "listeners"),
        (["PLAINTEXT://a:1"], ["SSL://b:2"], {}, "advertised_listeners"),
    ],
)
def test_invalid_listener_settings_name_the_key(
    listeners: list[str], advertised: list[str], mapping: dict[str, str], key: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _parse(listeners, tuple(advertised), mapping)
    assert info.value.key == key
