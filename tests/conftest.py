"""Fixtures shared by every tier."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.platform import TidelakeProcess

# fixtures every tier may use
pytest_plugins = ["tests.support.kafkajs"]


def _spark_driver_class_path() -> None:
    """Every SparkSession in this test process shares one JVM, launched by the
    first session; JVM options such as the driver class path only apply then.
    JDBC drivers must be on it (DriverManager ignores jars added later), so put
    every jar any test's session needs there up front, whichever module's
    session happens to start the JVM."""
    import os

    try:
        from spark.jars import find_hadoop_aws_jars, find_iceberg_runtime_jar, find_jdbc_driver_jar

        jars = [
            find_iceberg_runtime_jar(),
            find_jdbc_driver_jar("sqlite"),
            find_jdbc_driver_jar("postgresql"),
        ]
        jars += find_hadoop_aws_jars()
    except Exception:  # noqa: BLE001 - Spark tests report missing parts themselves
        return
    path = os.pathsep.join(jars)
    os.environ.setdefault(
        "PYSPARK_SUBMIT_ARGS", f"--driver-class-path {path} --jars {','.join(jars)} pyspark-shell"
    )


_spark_driver_class_path()


@pytest.hookimpl(trylast=True)  # after -m has deselected what it deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse to run ``one_process`` tests in a pytest-xdist worker: their items
    share one node id, so a worker would run one of them and count it as all."""
    if hasattr(config, "workerinput") and any(i.get_closest_marker("one_process") for i in items):
        raise pytest.UsageError(
            "tests marked one_process cannot run under pytest-xdist: add -m 'not one_process' "
            "and run them with -p no:xdist (scripts/dev.sh test does both)"
        )


@pytest.fixture(scope="module")
def tidelake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidelakeProcess]:
    """A running ``tidelake serve`` for one test module, stopped afterwards."""
    proc = TidelakeProcess(Path(tmp_path_factory.mktemp("tidelake")) / "data")
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
