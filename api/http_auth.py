"""Login for the admin API and the web console on the HTTP listener.

``[http] auth = "basic"``: every request to ``/api/v1`` and ``/ui`` (and the
API documents) needs HTTP basic credentials of a ``tidelake users`` user (the
Kafka SCRAM credentials, checked as the registry checks them). A browser shows
its own login prompt (the 401 carries ``WWW-Authenticate: Basic``);
``/login`` asks for the login and then sends the browser on to ``/ui/``. The
Iceberg REST routes (``/v1``) keep the catalog's OAuth2 bearer tokens
(``[catalog] serve_oauth2_clients``); ``/healthz`` and ``/metrics`` stay open
for probes and Prometheus unless ``protect_metrics`` is set.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, field_validator, model_validator
from starlette.types import ASGIApp, Receive, Scope, Send

from schema_registry.auth import RegistryAuth, check_tls_files

__all__ = ["HttpAuthMiddleware", "HttpSettings"]

_PROTECTED = ("/api/", "/ui", "/docs", "/redoc", "/openapi.json", "/login")
_OPEN_PROBES = ("/healthz", "/metrics")


class HttpSettings(BaseModel):
    """The ``[http]`` section (env prefix ``TIDELAKE_HTTP_``)."""

    model_config = ConfigDict(extra="forbid")

    auth: str = "none"  # "none" or "basic"
    protect_metrics: bool = False  # also ask for a login on /metrics and /healthz
    ssl_certfile: str | None = None  # TLS on the HTTP listener (catalog, API, console)
    ssl_keyfile: str | None = None

    @model_validator(mode="after")
    def _tls_files(self) -> HttpSettings:
        try:
            check_tls_files(self.ssl_certfile, self.ssl_keyfile)
        except ValueError as exc:  # a check over the section names its key by variable
            key = "SSL_CERTFILE" if self.ssl_certfile else "SSL_KEYFILE"
            raise ValueError(f"TIDELAKE_HTTP_{key}: {exc}") from None
        return self

    @field_validator("auth")
    @classmethod
    def _mode(cls, value: str) -> str:
        if value not in ("none", "basic"):
            raise ValueError(f"auth must be none or basic; got {value!r}")
        return value


def _ui_url(scope: Scope) -> bytes:
    """``/ui/`` as an absolute URL: a relative one would keep the user:password
    of the URL it is resolved against, and a page whose URL holds credentials
    may not fetch() anything."""
    host = b"localhost"
    for name, value in scope.get("headers", ()):
        if name == b"host":
            host = bytes(value)
    scheme = str(scope.get("scheme", "http"))
    return scheme.encode() + b"://" + host + b"/ui/"


def _protected(path: str, protect_metrics: bool) -> bool:
    if path == "/" or path.startswith(_PROTECTED):
        return True
    return protect_metrics and path.startswith(_OPEN_PROBES)


class HttpAuthMiddleware:
    """401 with a basic challenge for protected paths without a valid login."""

    def __init__(self, app: ASGIApp, auth: RegistryAuth, protect_metrics: bool = False) -> None:
        self.app = app
        self.auth = auth
        self.protect_metrics = protect_metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or not self.auth.enabled
            or not _protected(scope["path"], self.protect_metrics)
        ):
            await self.app(scope, receive, send)
            return
        header: str | None = None
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                header = value.decode("latin-1")
        user = await self.auth.authenticate(header)
        if user is None:
            body = json.dumps({"detail": "Log in with a Tidelake user (HTTP basic)"}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", b'Basic realm="tidelake", charset="UTF-8"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        if scope["path"] == "/login":
            # a browser given "https://user:pw@host/login" caches the login for the
            # realm and lands on a URL without credentials (from which the
            # console's own fetch() calls are allowed)
            await send(
                {
                    "type": "http.response.start",
                    "status": 303,
                    "headers": [(b"location", _ui_url(scope)), (b"content-length", b"0")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        scope.setdefault("state", {})["principal"] = user
        await self.app(scope, receive, send)
