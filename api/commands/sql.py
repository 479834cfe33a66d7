"""``tidelake sql "SELECT ..."``: run a query through Spark against the platform catalog.

Reads the same settings as ``tidelake serve`` (``--config``, ``--data-dir``, ``TIDELAKE_*``),
so it finds the same catalog and warehouse. Spark's own settings come from
``TIDELAKE_SPARK_*`` and the flags below.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import csv
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from api.commands.serve import add_settings_arguments, settings_from_args

__all__ = [
    "add_spark_arguments",
    "progress",
    "quiet_spark",
    "register",
    "spark_settings_from_args",
]


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
    p.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="show Spark's own output (NativeCodeLoader and other start-up warnings, "
        "log-level banners); without it they go to a log file shown only on failure",
    )


@contextlib.contextmanager
def progress(message: str, stream: TextIO | None = None) -> Iterator[None]:
    """A spinner with ``message`` on stderr while the block runs, when stderr is a
    terminal; nothing otherwise (pipes and logs stay clean)."""
    out = stream if stream is not None else sys.stderr
    if not out.isatty():
        yield
        return
    from rich.console import Console

    with Console(file=out).status(message):
        yield


@contextlib.contextmanager
def quiet_spark(verbose: bool, message: str) -> Iterator[None]:
    """Start Spark inside this block: unless ``verbose``, the JVM's own output
    (NativeCodeLoader, "Setting default log level" banners, log4j warnings) goes to
    a temporary log file instead of the command's stderr; the file's tail is shown
    if the block fails. The JVM keeps writing there until it exits."""
    if verbose:
        with progress(message):
            yield
        return
    log = tempfile.NamedTemporaryFile(prefix="tidelake-spark-", suffix=".log", delete=False)
    atexit.register(_remove, log.name)
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(log.fileno(), 2)  # the JVM inherits fd 2 when it starts
    log.close()
    failed = True
    try:
        with os.fdopen(os.dup(saved), "w") as terminal, progress(message, terminal):
            yield
        failed = False
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        if failed:
            tail = Path(log.name).read_text(errors="replace").splitlines()[-20:]
            if tail:
                print("Spark's output:\n" + "\n".join(tail), file=sys.stderr)


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


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
    spark_settings = spark_settings_from_args(args)
    try:
        with quiet_spark(getattr(args, "verbose", False), "starting Spark"):
            return settings, create_spark_session(settings.catalog, spark_settings)
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
    p.add_argument(
        "--limit", type=int, default=1000, help="print at most this many rows (default 1000)"
    )
    p.add_argument(
        "--format",
        choices=("table", "json", "csv"),
        default="table",
        help="table, JSON lines or CSV (default table)",
    )
    add_spark_arguments(p)
    p.set_defaults(func=_sql)


def _sql(args: argparse.Namespace) -> int:
    from spark.errors import SparkJobError
    from spark.query import run_query

    _, session = open_spark(args)
    try:
        with progress("running the query"):
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
