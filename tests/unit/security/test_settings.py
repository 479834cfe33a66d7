"""Security settings that cannot work fail when the broker's settings load,
naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ingest.config import BrokerConfig
from ingest.errors import ConfigError


def _key(**settings: Any) -> str:
    with pytest.raises(ValidationError) as info:
        BrokerConfig(**settings)
    return str(info.value.errors()[0]["loc"][0])


def test_default_broker_has_no_security_settings_to_check() -> None:
    assert BrokerConfig().listeners == []


def test_each_unworkable_setting_names_its_key(tmp_path: Path) -> None:
    cert = tmp_path / "server.pem"
    cert.write_text("not checked here")
    assert _key(listeners=["FOO://127.0.0.1:0"]) == "listener_security_protocol_map"
    assert _key(listeners=["SSL://127.0.0.1:0"]) == "ssl_certfile"
    assert _key(listeners=["SSL://127.0.0.1:0"], ssl_certfile=str(tmp_path / "x")) == (
        "ssl_certfile"
    )
    assert (
        _key(listeners=["SSL://127.0.0.1:0"], ssl_certfile=str(cert), ssl_client_auth="required")
        == "ssl_cafile"
    )
    assert (
        _key(
            listeners=["PLAINTEXT://127.0.0.1:0"],
            listener_ssl_client_auth={"MTLS": "required"},
        )
        == "listener_ssl_client_auth"
    )
    assert _key(sasl_enabled_mechanisms=["GSSAPI"]) == "sasl_enabled_mechanisms"
    assert _key(listeners=["PLAINTEXT://a:1"], advertised_listeners=["SSL://b:2"]) == (
        "advertised_listeners"
    )


def test_a_workable_tls_setup_loads(tmp_path: Path) -> None:
    cert = tmp_path / "server.pem"
    cert.write_text("x")
    config = BrokerConfig(
        listeners=["PLAINTEXT://127.0.0.1:9092", "mtls://127.0.0.1:9093"],
        listener_security_protocol_map={"MTLS": "SSL"},
        listener_ssl_client_auth={"mtls": "required"},
        ssl_certfile=str(cert),
        ssl_cafile=str(cert),
    )
    assert config.listener_ssl_client_auth == {"mtls": "required"}


def test_oauthbearer_needs_exactly_one_jwks_source_that_exists(tmp_path: Path) -> None:
    from ingest.security import MemoryCredentialStore
    from ingest.security.settings import make_authenticator

    oauth = ["OAUTHBEARER"]
    assert _key(sasl_enabled_mechanisms=oauth) == "sasl_oauthbearer_jwks_file"
    missing = str(tmp_path / "nope.json")
    assert _key(sasl_enabled_mechanisms=oauth, sasl_oauthbearer_jwks_file=missing) == (
        "sasl_oauthbearer_jwks_file"
    )
    jwks = tmp_path / "jwks.json"
    jwks.write_text('{"keys": []}')
    both = {"sasl_oauthbearer_jwks_file": str(jwks), "sasl_oauthbearer_jwks_url": "http://x/"}
    assert _key(sasl_enabled_mechanisms=oauth, **both) == "sasl_oauthbearer_jwks_file"
    assert _key(connections_max_reauth_ms=-1) == "connections_max_reauth_ms"
    config = BrokerConfig(
        sasl_enabled_mechanisms=[*oauth, "PLAIN"],
        sasl_oauthbearer_jwks_file=str(jwks),
        connections_max_reauth_ms=5000,
    )
    authenticator = make_authenticator(MemoryCredentialStore(), config)
    assert authenticator.mechanisms == ("OAUTHBEARER", "PLAIN")
    assert authenticator.oauth is not None and authenticator.max_reauth_ms == 5000
    jwks.write_text("not json")
    with pytest.raises(ConfigError) as info:
        make_authenticator(MemoryCredentialStore(), config)
    assert info.value.key == "sasl_oauthbearer_jwks_file"
