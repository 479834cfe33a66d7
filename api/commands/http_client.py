"""The login and the trusted CA with which CLI commands call Tidelake's HTTP
services (the schema registry, the admin API ``/api/v1``).

Where each part comes from, the first that gives it wins:

- user: ``--http-user``, ``TIDELAKE_HTTP_USER``, the user of
  ``basic.auth.user.info`` in ``--command-config`` (Confluent's
  schema-registry client names; ``basic.auth.credentials.source`` is
  ``USER_INFO``, the default, or ``SASL_INHERIT`` for the file's
  ``sasl.username`` / ``sasl.password``, Tidelake's HTTP users being its
  Kafka users);
- password: ``--http-password`` (visible to ``ps``: a last resort),
  ``--http-password-file``, ``TIDELAKE_HTTP_PASSWORD``, the password of
  ``--command-config`` when it names the same user, else a prompt
  (``getpass``) when stdin is a terminal;
- CA: ``--ca-file``, ``TIDELAKE_HTTP_CA_FILE``,
  ``schema.registry.ssl.ca.location`` of ``--command-config``; none means
  the system's trust store (``SSL_CERT_FILE`` still works).

With no user at all, a ``user:password@`` in the URL is sent as before.
A 401 becomes one line that says how to log in (:func:`login_refused`).
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    import ssl

    import httpx

__all__ = [
    "HttpLogin",
    "RequestOptions",
    "add_http_login",
    "describe_error",
    "http_login",
    "kafka_settings",
    "login_from_args",
    "login_refused",
    "read_command_config",
]

USER_ENV = "TIDELAKE_HTTP_USER"
PASSWORD_ENV = "TIDELAKE_HTTP_PASSWORD"
CA_ENV = "TIDELAKE_HTTP_CA_FILE"
_PREFIX = "schema.registry."
# keys of a --command-config file that only the HTTP clients read (librdkafka refuses them)
_HTTP_ONLY = ("basic.auth.", "bearer.auth.", _PREFIX)


class RequestOptions(TypedDict, total=False):
    """Keyword arguments for ``httpx.request`` / ``httpx.get``."""

    auth: httpx.BasicAuth
    verify: ssl.SSLContext


@dataclass(frozen=True)
class HttpLogin:
    """Who the CLI logs in as and which CA it trusts; all optional."""

    user: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: str | None = None

    def request_options(self) -> RequestOptions:
        import httpx

        out: RequestOptions = {}
        if self.user is not None:
            out["auth"] = httpx.BasicAuth(self.user, self.password or "")
        if self.ca_file is not None:
            out["verify"] = _trust(self.ca_file)
        return out


def _trust(ca_file: str) -> ssl.SSLContext:
    import ssl

    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise SystemExit(f"tidelake: --ca-file {ca_file}: cannot load it: {exc}") from None


def add_http_login(parser: argparse.ArgumentParser, *, again: bool = False) -> None:
    """``--http-user``, ``--http-password-file``, ``--http-password``,
    ``--ca-file`` (``again``: after the action too, not overriding what
    was given before it)."""
    extra: dict[str, Any] = {"default": argparse.SUPPRESS} if again else {}

    def helped(text: str) -> str:
        return "the same as before the action" if again else text

    parser.add_argument(
        "--http-user",
        metavar="USER",
        help=helped(
            f"log in to the HTTP service as this `tidelake users` user (default: ${USER_ENV}, "
            "else basic.auth.user.info of --command-config)"
        ),
        **extra,
    )
    parser.add_argument(
        "--http-password-file",
        metavar="FILE",
        help=helped(
            f"a file holding the password (default: ${PASSWORD_ENV}, else a prompt "
            "when stdin is a terminal)"
        ),
        **extra,
    )
    parser.add_argument(
        "--http-password",
        metavar="PASSWORD",
        help=helped(
            "the password on the command line: visible to `ps` and kept in the shell "
            f"history; prefer ${PASSWORD_ENV} or --http-password-file"
        ),
        **extra,
    )
    parser.add_argument(
        "--ca-file",
        metavar="PEM",
        help=helped(
            f"trust this CA for https:// URLs (default: ${CA_ENV}, else "
            "schema.registry.ssl.ca.location of --command-config, else the system's CAs)"
        ),
        **extra,
    )


def read_command_config(args: argparse.Namespace) -> dict[str, str]:
    """The properties of ``--command-config`` (empty without it)."""
    from api.commands.client_config import ClientConfigError, read_client_config

    path = getattr(args, "command_config", None)
    if not path:
        return {}
    try:
        return read_client_config(path)
    except ClientConfigError as exc:
        raise SystemExit(f"tidelake: --command-config {path}: {exc}") from None


def kafka_settings(props: Mapping[str, str]) -> dict[str, str]:
    """``props`` without the keys only the HTTP clients read."""
    return {k: v for k, v in props.items() if not k.startswith(_HTTP_ONLY)}


def _prop(props: Mapping[str, str], key: str) -> str | None:
    """A Confluent schema-registry client setting, plain or ``schema.registry.``-prefixed."""
    return props.get(key, props.get(_PREFIX + key))


def _file_login(props: Mapping[str, str]) -> tuple[str, str] | None:
    """(user, password) of a ``--command-config`` file's basic-auth settings."""
    source = (_prop(props, "basic.auth.credentials.source") or "USER_INFO").upper()
    if source == "SASL_INHERIT":
        user, password = props.get("sasl.username"), props.get("sasl.password")
        if not user or password is None:
            raise SystemExit(
                "tidelake: --command-config: basic.auth.credentials.source=SASL_INHERIT "
                "needs sasl.username and sasl.password (or sasl.jaas.config)"
            )
        return user, password
    if source == "URL":
        return None  # the user:password@ of the URL
    if source != "USER_INFO":
        raise SystemExit(
            f"tidelake: --command-config: basic.auth.credentials.source={source} is not "
            "supported here (USER_INFO, SASL_INHERIT or URL)"
        )
    info = _prop(props, "basic.auth.user.info")
    if info is None:
        return None
    user, sep, password = info.partition(":")
    if not sep or not user:
        raise SystemExit("tidelake: --command-config: basic.auth.user.info expects USER:PASSWORD")
    return user, password


def _read_password_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise SystemExit(f"tidelake: --http-password-file {path}: {exc.strerror}") from None
    return text.rstrip("\r\n")


def http_login(args: argparse.Namespace, props: Mapping[str, str] | None = None) -> HttpLogin:
    """The login of the command line, the environment and ``props`` (the
    ``--command-config`` file), as the module docstring orders them."""
    props = props or {}
    from_file = _file_login(props)
    user = getattr(args, "http_user", None) or os.environ.get(USER_ENV) or None
    password: str | None = getattr(args, "http_password", None)
    if password is None and getattr(args, "http_password_file", None):
        password = _read_password_file(args.http_password_file)
    if password is None:
        password = os.environ.get(PASSWORD_ENV)
    if user is None and from_file is not None:
        user = from_file[0]
    if password is None and from_file is not None and from_file[0] == user:
        password = from_file[1]
    if user is not None and password is None:
        if not sys.stdin.isatty():
            raise SystemExit(
                f"tidelake: no password for --http-user {user}: set {PASSWORD_ENV} "
                "or give --http-password-file FILE"
            )
        password = getpass.getpass(f"password of {user}: ")
    ca_file = (
        getattr(args, "ca_file", None)
        or os.environ.get(CA_ENV)
        or props.get(_PREFIX + "ssl.ca.location")
    )
    return HttpLogin(user, password, ca_file or None)


def login_from_args(args: argparse.Namespace) -> HttpLogin:
    """:func:`http_login` with ``--command-config`` read when the command has it."""
    return http_login(args, read_command_config(args))


def login_refused(response: httpx.Response, login: HttpLogin, service: str) -> str | None:
    """One line for a 401 of ``service`` (None for any other answer)."""
    if response.status_code != 401:
        return None
    url = response.request.url
    where = f"{service} at {url.scheme}://{url.netloc.decode('ascii')}"
    if login.user is None and not url.username:
        return (
            f"{where} asks for a login (401): pass --http-user USER "
            f"(or set {USER_ENV}) and the password in {PASSWORD_ENV}"
        )
    user = login.user or url.username
    return (
        f"{where} refused the login of {user!r} (401): check --http-user ({USER_ENV}) "
        f"and the password ({PASSWORD_ENV}, --http-password-file)"
    )


def describe_error(exc: httpx.HTTPError) -> str:
    """``exc`` in one line, with a hint when the server's certificate is not trusted."""
    text = str(exc) or type(exc).__name__
    if "CERTIFICATE_VERIFY_FAILED" in text:
        text += f" (trust the server's CA with --ca-file PEM or {CA_ENV})"
    return text
