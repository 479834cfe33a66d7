"""``tidelake serve``: run the broker, schema registry and HTTP API."""

from __future__ import annotations

import argparse
import errno
import logging
import sys
from typing import Any

__all__ = ["add_settings_arguments", "connect_address", "register", "settings_from_args"]


def add_settings_arguments(
    p: argparse.ArgumentParser,
    *,
    config_dest: str = "config",
    again: bool = False,
) -> None:
    """The flags every command that reads the platform's settings accepts.

    ``config_dest`` names the attribute for ``--config FILE`` when a subcommand
    uses ``args.config`` for something else; a parser that has its own
    ``--config`` or ``--set`` (``topics create --config KEY=VALUE``) keeps it. ``again`` is for a subcommand that
    repeats its parent's flags: no defaults, so a flag given before the
    subcommand is not reset by it."""
    default: dict[str, Any] = {"default": argparse.SUPPRESS} if again else {}
    # a flag the parser already has keeps its own meaning (alter-config's --set)
    taken = set(p._option_string_actions)
    if "--config" not in taken:
        p.add_argument(
            "--config",
            "-c",
            dest=config_dest,
            metavar="FILE",
            help="TOML config file (also TIDELAKE_CONFIG)",
            **default,
        )
    p.add_argument(
        "--data-dir",
        metavar="DIR",
        help="where all local state lives (default ./tidelake-data)",
        **default,
    )
    p.set_defaults(_config_dest=config_dest)
    if "--set" in taken:
        return
    p.add_argument(
        "--set",
        action="append",
        default=argparse.SUPPRESS if again else [],
        dest="settings_overrides",
        metavar="KEY=VALUE",
        help="any setting, dotted for a section (broker.node_id=2, catalog.uri=...); "
        "VALUE is read as a TOML value, else as a string; beats TIDELAKE_* (repeatable)",
    )


def settings_from_args(args: argparse.Namespace) -> Any:
    """The platform's settings, as ``tidelake serve`` reads them. An invalid
    setting prints one line and exits 2; each ``TIDELAKE_*`` variable that
    matches no setting gets a one-line warning."""
    from api.settings import load_settings, unknown_environment
    from ingest.errors import ConfigError

    for warning in unknown_environment():
        print(f"tidelake: warning: {warning}", file=sys.stderr)
    flags = {
        k: getattr(args, k, None)
        for k in ("data_dir", "kafka_listen", "registry_listen", "http_listen")
    }
    config = getattr(args, getattr(args, "_config_dest", "config"), None)
    try:
        overrides = _parse_overrides(getattr(args, "settings_overrides", None) or [])
        return load_settings(config, overrides, **flags)
    except ConfigError as exc:
        print(f"tidelake: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def connect_address(listen: str) -> str:
    """Where a client on this host reaches a server listening on ``listen``
    (``0.0.0.0`` and ``::`` mean every address: use the loopback one)."""
    from ingest.config import parse_hostport

    host, port = parse_hostport(listen, "listen")
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _taken_listener(settings: Any) -> str | None:
    """The first of the three listen addresses that cannot be bound, as one line:
    checked before anything starts, so a taken port never leaves a half-started
    platform and a traceback behind."""
    import socket

    from ingest.config import parse_hostport

    p = settings.process
    # with [broker] listeners the broker binds those instead of kafka_listen
    kafka = [
        ("broker.listeners", "Kafka listener", listener.partition("://")[2] or listener)
        for listener in settings.broker.listeners
    ] or [("kafka_listen", "Kafka listener", p.kafka_listen)]
    for key, what, listen in (
        *kafka,
        ("registry_listen", "schema registry", p.registry_listen),
        ("http_listen", "HTTP API", p.http_listen),
    ):
        host, port = parse_hostport(listen, key)
        if port == 0:
            continue
        try:
            infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            return f"cannot start the {what} on {listen} ({key}): {exc}"
        family, kind, proto, _, address = infos[0]
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                reason = "address already in use" if exc.errno == errno.EADDRINUSE else exc
                return f"cannot start the {what} on {listen} ({key}): {reason}"
    return None


def _parse_overrides(items: list[str]) -> dict[str, Any]:
    import tomllib

    from ingest.errors import ConfigError

    out: dict[str, Any] = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError("--set", f"{item!r} is not KEY=VALUE")
        try:
            value: Any = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw  # a bare string: host:port, a URL, a path
        out[key.strip()] = value
    return out


def register(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="run Tidelake: Kafka broker, schema registry, Iceberg REST catalog and HTTP API",
        description="Run Tidelake with its embedded defaults unless told otherwise: Kafka on 127.0.0.1:9092, "
        "schema registry on 127.0.0.1:8081, HTTP API on 127.0.0.1:8181, state under ./tidelake-data. "
        "Precedence: flags > environment (TIDELAKE_*) > config file > defaults.",
    )
    add_settings_arguments(p)
    p.add_argument(
        "--kafka-listen", metavar="HOST:PORT", help="Kafka listener (default 127.0.0.1:9092)"
    )
    p.add_argument(
        "--registry-listen", metavar="HOST:PORT", help="schema registry (default 127.0.0.1:8081)"
    )
    p.add_argument(
        "--http-listen",
        metavar="HOST:PORT",
        help="HTTP API and Iceberg REST catalog (default 127.0.0.1:8181)",
    )
    p.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from api.process import run

    settings = settings_from_args(args)
    taken = _taken_listener(settings)
    if taken is not None:
        print(f"tidelake: {taken}", file=sys.stderr)
        return 1
    logging.basicConfig(
        level=settings.process.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        run(settings)
    except OSError as exc:
        print(f"tidelake: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0
