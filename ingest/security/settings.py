"""Checks of the broker's security settings that need more than one key."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import jwt

from ingest.errors import ConfigError
from ingest.security.credentials import CredentialStore
from ingest.security.listeners import parse_listeners
from ingest.security.oauth import FileJwks, JwksSource, OAuthSettings, TokenValidator, UrlJwks
from ingest.security.sasl import OAUTHBEARER, SUPPORTED, SaslAuthenticator

if TYPE_CHECKING:
    from ingest.config import BrokerConfig

__all__ = ["check_security", "make_authenticator"]


def check_security(config: BrokerConfig) -> None:
    """Raise ``ConfigError`` naming the key when the listeners, TLS files or
    SASL mechanisms cannot work together."""
    listeners = parse_listeners(
        config.listeners,
        config.advertised_listeners,
        config.listener_security_protocol_map,
        default_host=config.host,
        default_port=config.port,
        advertised_host=config.advertised_host,
        advertised_port=config.advertised_port,
    )
    names = {listener.name for listener in listeners}
    per_listener = {k.upper(): v for k, v in config.listener_ssl_client_auth.items()}
    unknown = sorted(set(per_listener) - names)
    if unknown:
        raise ConfigError("listener_ssl_client_auth", f"no listener named {unknown}")
    tls = [listener for listener in listeners if listener.protocol.uses_tls]
    if tls:
        for key in ("ssl_certfile", "ssl_keyfile"):
            path = getattr(config, key)
            if key == "ssl_certfile" and not path:
                raise ConfigError(key, f"listener {tls[0].name} uses TLS: set the certificate")
            if path and not os.path.isfile(path):
                raise ConfigError(key, f"no such file {path}")
        wants_certs = any(
            per_listener.get(listener.name, config.ssl_client_auth) != "none" for listener in tls
        )
        if wants_certs and not config.ssl_cafile:
            raise ConfigError("ssl_cafile", "client certificates need the CA that signs them")
        if config.ssl_cafile and not os.path.isfile(config.ssl_cafile):
            raise ConfigError("ssl_cafile", f"no such file {config.ssl_cafile}")
    odd = [p for p in config.super_users if not _is_principal(p)]
    if odd:
        raise ConfigError("super_users", f"{odd}: a principal is TYPE:NAME, e.g. User:admin")
    bad = [m for m in config.sasl_enabled_mechanisms if m not in SUPPORTED]
    if bad:
        raise ConfigError(
            "sasl_enabled_mechanisms", f"unsupported {bad}; supported: {list(SUPPORTED)}"
        )
    if OAUTHBEARER in config.sasl_enabled_mechanisms:
        file, url = config.sasl_oauthbearer_jwks_file, config.sasl_oauthbearer_jwks_url
        if bool(file) == bool(url):
            raise ConfigError(
                "sasl_oauthbearer_jwks_file",
                "OAUTHBEARER needs exactly one of sasl_oauthbearer_jwks_file / _url",
            )
        if file and not os.path.isfile(file):
            raise ConfigError("sasl_oauthbearer_jwks_file", f"no such file {file}")


def make_authenticator(credentials: CredentialStore, config: BrokerConfig) -> SaslAuthenticator:
    """The broker's SASL mechanisms from its settings (OAUTHBEARER's JWKS
    source and token checks, the re-authentication limit)."""
    validator: TokenValidator | None = None
    if OAUTHBEARER in config.sasl_enabled_mechanisms:
        source: JwksSource
        if config.sasl_oauthbearer_jwks_file:
            try:
                source = FileJwks(config.sasl_oauthbearer_jwks_file)
            except (OSError, ValueError, jwt.PyJWTError) as exc:
                raise ConfigError(
                    "sasl_oauthbearer_jwks_file", f"not a readable JWKS: {exc}"
                ) from exc
        else:
            assert config.sasl_oauthbearer_jwks_url is not None  # check_security
            source = UrlJwks(
                config.sasl_oauthbearer_jwks_url, config.sasl_oauthbearer_jwks_refresh_ms / 1000
            )
        validator = TokenValidator(
            source,
            OAuthSettings(
                issuer=config.sasl_oauthbearer_expected_issuer,
                audience=tuple(config.sasl_oauthbearer_expected_audience),
                principal_claim=config.sasl_oauthbearer_sub_claim_name,
                clock_skew_s=config.sasl_oauthbearer_clock_skew_seconds,
                required_scopes=tuple(config.sasl_oauthbearer_required_scopes),
                scope_claim=config.sasl_oauthbearer_scope_claim_name,
            ),
        )
    return SaslAuthenticator(
        credentials,
        config.sasl_enabled_mechanisms,
        oauth=validator,
        max_reauth_ms=config.connections_max_reauth_ms,
    )


def _is_principal(value: str) -> bool:
    kind, sep, name = value.partition(":")
    return bool(kind and sep and name)
