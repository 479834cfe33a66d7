"""``tidelake serve``: run the broker, schema registry and HTTP API."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

__all__ = ["register", "add_settings_arguments", "settings_from_args"]


def add_settings_arguments(p: argparse.ArgumentParser) -> None:
    """The flags every command that reads the platform's settings accepts."""
    p.add_argument("--config", "-c", metavar="FILE", help="TOML config file (also TIDELAKE_CONFIG)")
    p.add_argument(
        "--data-dir", metavar="DIR", help="where all local state lives (default ./tidelake-data)"
    )


def settings_from_args(args: argparse.Namespace) -> Any:
    from api.settings import load_settings
    from ingest.errors import ConfigError

    flags = {
        k: getattr(args, k, None)
        for k in ("data_dir", "kafka_listen", "registry_listen", "http_listen")
    }
    try:
        return load_settings(getattr(args, "config", None), **flags)
    except ConfigError as exc:
        print(f"tidelake: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


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
