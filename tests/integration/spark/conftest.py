"""Fixtures for Spark tests: a platform catalog in a temp dir, one SparkSession per module.

Spark tests are part of the suite: when Java, pyspark or the Iceberg runtime jar is
missing they fail with the reason instead of skipping.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table

from catalog.config import CatalogSettings
from catalog.factory import load_platform_catalog
from spark.config import SparkSettings
from spark.errors import SparkUnavailableError

pytestmark = pytest.mark.spark

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("key", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)


@dataclass
class Platform:
    settings: CatalogSettings
    catalog: Catalog
    data_dir: Path


def spark_settings() -> SparkSettings:
    return SparkSettings(master="local[2]", shuffle_partitions=2, log_level="ERROR")


def start_spark(settings: CatalogSettings) -> Any:
    from spark.session import create_spark_session

    try:
        return create_spark_session(settings, spark_settings())
    except SparkUnavailableError as exc:
        pytest.fail(f"Spark tests need Java 17, pyspark and the Iceberg runtime: {exc}")


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Platform:
    data_dir = tmp_path_factory.mktemp("spark-platform")
    settings = CatalogSettings(data_dir=data_dir)
    return Platform(settings, load_platform_catalog(settings), data_dir)


@pytest.fixture(scope="module")
def spark(platform: Platform) -> Iterator[Any]:
    session = start_spark(platform.settings)
    yield session
    session.stop()


def batch(start_id: int, rows: int) -> pa.Table:
    ids = list(range(start_id, start_id + rows))
    return pa.table(
        {"id": ids, "key": [f"k{i % 7}" for i in ids], "amount": [i * 0.5 for i in ids]},
        schema=SCHEMA,
    )


def append_with_offsets(table: Table, data: pa.Table, next_offset: int, retries: int = 20) -> Table:
    """Commit like a Table Coordinator: one append with the stream offsets; retry conflicts."""
    props = {"tidelake.offsets": json.dumps({"0": next_offset})}
    for _ in range(retries):
        try:
            table.append(data, snapshot_properties=props)
            return table
        except CommitFailedException:
            table.refresh()
    raise AssertionError("append kept conflicting")


def small_append_table(
    catalog: Catalog, identifier: str, commits: int, rows_per_commit: int = 10, **props: str
) -> Table:
    """A table written the way streaming commits write it: many small appends."""
    namespace = identifier.rsplit(".", 1)[0]
    catalog.create_namespace_if_not_exists(namespace)
    table = catalog.create_table(
        identifier, schema=SCHEMA, properties={"format-version": "2", **props}
    )
    for i in range(commits):
        append_with_offsets(
            table, batch(i * rows_per_commit, rows_per_commit), (i + 1) * rows_per_commit
        )
    return table


def checksum(rows: list[dict[str, Any]] | pa.Table) -> tuple[int, str]:
    """(row count, digest of the rows in id order): equal content gives equal checksums."""
    items = rows.to_pylist() if isinstance(rows, pa.Table) else rows
    ordered = sorted(items, key=lambda r: r["id"])
    digest = hashlib.sha256(
        json.dumps([[r["id"], r["key"], r["amount"]] for r in ordered]).encode()
    ).hexdigest()
    return len(ordered), digest


def spark_rows(spark: Any, identifier: str) -> list[dict[str, Any]]:
    return [r.asDict() for r in spark.sql(f"SELECT id, key, amount FROM {identifier}").collect()]


def data_file_count(table: Table) -> int:
    table.refresh()
    snapshot = table.current_snapshot()
    if snapshot is None:
        return 0
    return sum(1 for _ in table.scan().plan_files())
