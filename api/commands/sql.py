"""``tidelake sql "SELECT ..."``: run a query through Spark against the platform catalog.

Reads the same settings as ``tidelake serve`` (``--config``, ``--data-dir``, ``TIDELAKE_*``),
so it finds the same catalog and warehouse. Spark's own settings come from
``TIDELAKE_SPARK_*`` and the flags below.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from typing import Any

from api.commands.serve import add_settings_arguments, settings_from_args

__all__ = ["add_spark_arguments", "register", "spark_settings_from_args"]


def add_spark_arguments(p: argparse.ArgumentParser) -> None:
    """Flags shared by the commands that start Spark."""
    add_settings_arguments(p)
    p.add_argument("--master", help="Spark master URL (default local[*]; TIDELAKE_SPARK_MASTER)")
    p.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark configuration (repeatable)",
    )
    p.add_argument(
        "--packages",
        help="Maven coordinates for spark.jars.packages (comma-separated; needs Maven access)",
    )


def spark_settings_from_args(args: argparse.Namespace) -> Any:
    from pydantic import ValidationError

    from spark.config import SparkSettings

    overrides: dict[str, Any] = {}
    if getattr(args, "master", None):
        overrides["master"] = args.master
    if getattr(args, "packages", None):
        overrides["packages"] = [p for p in args.packages.split(",") if p]
    conf: dict[str, str] = {}
    for item in getattr(args, "spark_conf", []) or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"tidelake: --spark-conf wants KEY=VALUE, got {item!r}", file=sys.stderr)
            raise SystemExit(2)
        conf[key] = value
    try:
        base = SparkSettings()
        if conf:
            overrides["conf"] = {**base.conf, **conf}
        return base.model_copy(update=overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        print(f"tidelake: spark.{'.'.join(map(str, err['loc']))}: {err['msg']}", file=sys.stderr)
        raise SystemExit(2) from None


def open_spark(args: argparse.Namespace) -> Any:
    """The platform settings and a SparkSession for them; exits 1 if Spark cannot start."""
    from spark.errors import SparkJobError
    from spark.session import create_spark_session

    settings = settings_from_args(args)
    try:
        return settings, create_spark_session(settings.catalog, spark_settings_from_args(args))
    except SparkJobError as exc:
        print(f"tidelake: cannot start Spark: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sql",
        help="run a SQL query through Spark against the platform catalog",
        description="Run one Spark SQL statement against the platform's Iceberg catalog "
        "(its default catalog; tables are namespace.table) and print the result.",
    )
    p.add_argument("statement", help='the SQL statement, e.g. "SELECT count(*) FROM ns.t"')
    p.add_argument("--limit", type=int, default=1000, help="print at most this many rows")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
    add_spark_arguments(p)
    p.set_defaults(func=_sql)


def _sql(args: argparse.Namespace) -> int:
    from spark.errors import SparkJobError
    from spark.query import run_query

    _, session = open_spark(args)
    try:
        result = run_query(session, args.statement, limit=args.limit)
    except SparkJobError as exc:
        print(f"tidelake: {exc}", file=sys.stderr)
        return 1
    finally:
        session.stop()
    if args.format == "json":
        for row in result.rows:
            print(json.dumps(dict(zip(result.columns, row, strict=True)), default=str))
    elif args.format == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(result.columns)
        writer.writerows(result.rows)
    else:
        _print_table(result.columns, result.rows)
    if result.truncated:
        print(f"(first {args.limit} rows; use --limit for more)", file=sys.stderr)
    return 0


def _print_table(columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    if not columns:
        print("OK")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(show_lines=False)
    for name in columns:
        table.add_column(name)
    for row in rows:
        table.add_row(*("NULL" if v is None else str(v) for v in row))
    Console(width=max(80, min(200, 20 * len(columns)))).print(table)
    print(f"{len(rows)} row{'s' if len(rows) != 1 else ''}")
