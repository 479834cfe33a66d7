"""TLS for the Kafka listener, on Python's ``ssl`` module."""

from __future__ import annotations

import ssl
from typing import Any, Literal

from ingest.errors import ConfigError

__all__ = ["ClientAuth", "principal_of", "server_context"]

ClientAuth = Literal["none", "requested", "required"]


def server_context(
    certfile: str | None,
    keyfile: str | None,
    cafile: str | None,
    client_auth: ClientAuth = "none",
) -> ssl.SSLContext:
    """A server context: TLS 1.2 or newer, the broker's certificate, and
    client certificates checked against ``cafile`` when ``client_auth`` asks
    for them (Kafka's ``ssl.client.auth``)."""
    if not certfile:
        raise ConfigError("ssl_certfile", "a TLS listener needs the server certificate")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(certfile, keyfile or None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError("ssl_certfile", f"cannot load {certfile}: {exc}") from exc
    if client_auth != "none":
        if not cafile:
            raise ConfigError("ssl_cafile", f"ssl_client_auth={client_auth} needs a CA file")
        try:
            ctx.load_verify_locations(cafile)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError("ssl_cafile", f"cannot load {cafile}: {exc}") from exc
        ctx.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    return ctx


def principal_of(peercert: Any) -> str | None:
    """``User:<CN>`` of a verified client certificate (``getpeercert()``), or None."""
    if not peercert:
        return None
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return f"User:{value}"
    return None
