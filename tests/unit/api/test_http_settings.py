"""[http] and the registry's security settings: defaults keep everything open,
and a TLS file that cannot load stops start-up with the key named."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.settings import load_settings
from ingest.errors import ConfigError


def test_defaults_are_open_and_plain(tmp_path: Path) -> None:
    s = load_settings(data_dir=tmp_path)
    assert (s.http.auth, s.http.ssl_certfile, s.registry.auth) == ("none", None, "none")


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("http.ssl_certfile", "cannot load"),
        ("registry.ssl_certfile", "cannot load"),
        ("registry.ssl_keyfile", "ssl_certfile is not"),
        ("http.auth", "none or basic"),
        ("registry.auth", "basic,bearer"),
    ],
)
def test_bad_security_settings_name_their_key(tmp_path: Path, key: str, message: str) -> None:
    value = str(tmp_path / "missing.pem") if "ssl" in key else "digest"
    with pytest.raises(ConfigError, match=message) as err:
        load_settings(data_dir=tmp_path, overrides={key: value})
    assert err.value.key == key


def test_environment_sets_roles_as_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDELAKE_HTTP_AUTH", "basic")
    monkeypatch.setenv("TIDELAKE_REGISTRY_ROLES", '{"alice": ["write:orders-*"]}')
    s = load_settings(data_dir=tmp_path)
    assert s.http.auth == "basic"
    assert s.registry.roles == {"alice": ["write:orders-*"]}
