"""Run a SQL statement through Spark and collect a bounded result for printing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spark.errors import SparkJobError

__all__ = ["QueryResult", "run_query"]


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool


def run_query(session: Any, statement: str, limit: int = 1000) -> QueryResult:
    """Run ``statement``; return at most ``limit`` rows (``truncated`` says if there were more).

    Spark's analysis and execution errors become :class:`SparkJobError` with Spark's message.
    """
    try:
        frame = session.sql(statement)
        columns = list(frame.columns)
        rows = frame.take(limit + 1) if columns else []
    except Exception as exc:  # pyspark raises AnalysisException, Py4JJavaError, ...
        raise SparkJobError(_spark_message(exc)) from exc
    truncated = len(rows) > limit
    return QueryResult(columns, [tuple(r) for r in rows[:limit]], truncated)


def _spark_message(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "JVM stacktrace", "Traceback")):
            return line
    return type(exc).__name__
