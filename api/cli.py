"""The ``tidelake`` command line.

Each command family lives in its own module under ``api/commands/`` and
exposes ``register(subparsers)``; this module only assembles them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["main", "build_parser"]

# Command families, in the order ``tidelake --help`` lists them.
_COMMAND_MODULES = (
    "api.commands.serve",
    "api.commands.topics",
    "api.commands.groups",
    "api.commands.cluster",
    "api.commands.tables",
    "api.commands.schemas",
    "api.commands.maintenance",
    "api.commands.sql",
    "api.commands.storage",
    "api.commands.users",
    "api.commands.acls",
    "api.commands.quotas",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tidelake",
        description="Tidelake: a Kafka-compatible streaming platform whose topics become Iceberg tables.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # family not built yet
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    result = args.func(args)
    return int(result or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
