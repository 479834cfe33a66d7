"""Procedure call helpers, conflict retries and the schedule loop."""

from __future__ import annotations

import threading

import pytest

from spark.errors import MaintenanceJobError
from spark.jobs._procedures import quote_identifier, sql_string, with_conflict_retries
from spark.schedule import run_every


def test_identifiers_and_strings_are_quoted_for_spark_sql() -> None:
    assert quote_identifier("ns.t") == "`ns`.`t`"
    assert quote_identifier(["we`ird", "t"]) == "`we``ird`.`t`"
    assert sql_string("it's") == "'it\\'s'"


def test_commit_conflicts_are_retried_then_reported() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("org.apache.iceberg.exceptions.CommitFailedException: stale")
        return "done"

    assert with_conflict_retries(flaky, what="x", backoff_s=0) == "done" and len(calls) == 3

    def always() -> None:
        raise RuntimeError("CommitFailedException: stale")

    with pytest.raises(MaintenanceJobError, match="x failed"):
        with_conflict_retries(always, what="x", attempts=2, backoff_s=0)


def test_other_failures_are_not_retried() -> None:
    calls = []

    def broken() -> None:
        calls.append(1)
        raise RuntimeError("AnalysisException: no such table")

    with pytest.raises(MaintenanceJobError):
        with_conflict_retries(broken, what="y", backoff_s=0)
    assert len(calls) == 1


def test_schedule_runs_until_max_runs_and_survives_failures() -> None:
    seen = []

    def job() -> None:
        seen.append(1)
        if len(seen) == 1:
            raise RuntimeError("boom")

    assert run_every(0.01, job, max_runs=3) == 3 and len(seen) == 3


def test_schedule_stops_when_told() -> None:
    stop = threading.Event()
    stop.set()
    assert run_every(10, lambda: None, stop=stop) == 0
