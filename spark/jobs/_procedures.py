"""Calling Iceberg's Spark procedures: quoting, retries on commit conflicts, result rows."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from spark.errors import MaintenanceJobError

__all__ = ["call_procedure", "quote_identifier", "sql_string", "with_conflict_retries"]

_log = logging.getLogger(__name__)
T = TypeVar("T")

# Exceptions (by Java class name in Spark's message) that a fresh attempt can cure:
# another writer committed between our read of the table and our commit.
_RETRIABLE = (
    "CommitFailedException",
    "ValidationException: Cannot commit",
    "Found conflicting files",
    "Missing required files to delete",
    "SQLITE_BUSY",
    "CommitStateUnknownException",
)


def sql_string(value: str) -> str:
    """A Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote_identifier(identifier: str | Sequence[str]) -> str:
    """``ns.table`` (or parts) as a back-quoted multi-part Spark identifier."""
    parts = identifier.split(".") if isinstance(identifier, str) else list(identifier)
    return ".".join("`" + p.replace("`", "``") + "`" for p in parts)


def _is_retriable(exc: BaseException) -> bool:
    text = str(exc)
    return any(marker in text for marker in _RETRIABLE)


def with_conflict_retries(
    action: Callable[[], T], *, what: str, attempts: int = 4, backoff_s: float = 0.5
) -> T:
    """Run ``action``; on a commit conflict retry up to ``attempts`` times in all.

    Other failures, and the last conflict, raise :class:`MaintenanceJobError`.
    """
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except Exception as exc:  # py4j / pyspark errors carry the Java class in the text
            if attempt < attempts and _is_retriable(exc):
                _log.warning(
                    "%s: commit conflict (attempt %d/%d), retrying", what, attempt, attempts
                )
                time.sleep(backoff_s * attempt)
                continue
            raise MaintenanceJobError(f"{what} failed: {_first_line(exc)}") from exc
    raise AssertionError("unreachable")


def _first_line(exc: BaseException) -> str:
    for line in str(exc).splitlines():
        line = line.strip()
        if line and not line.startswith("at "):
            return line[:500]
    return type(exc).__name__


def _argument(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, Mapping):
        items = ", ".join(f"{sql_string(str(k))}, {sql_string(str(v))}" for k, v in value.items())
        return f"map({items})"
    if isinstance(value, _Raw):
        return value.sql
    return sql_string(str(value))


class _Raw:
    """An argument given as SQL text (for example a TIMESTAMP literal)."""

    def __init__(self, sql: str) -> None:
        self.sql = sql


def raw(sql: str) -> _Raw:
    return _Raw(sql)


def call_procedure(
    session: Any, catalog: str, procedure: str, arguments: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """``CALL <catalog>.system.<procedure>(name => value, ...)``; rows as dicts."""
    args = ", ".join(f"{k} => {_argument(v)}" for k, v in arguments.items() if v is not None)
    statement = f"CALL {quote_identifier(catalog)}.system.{procedure}({args})"
    _log.info("%s", statement)
    return [row.asDict() for row in session.sql(statement).collect()]
