"""The platform catalog on PostgreSQL: pyiceberg's SqlCatalog and Spark's JDBC catalog share it.

Needs PostgreSQL on 127.0.0.1:5432 (every project machine runs it) and the JDBC
driver from Debian's ``libpostgresql-jdbc-java``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from catalog.config import CatalogSettings
from catalog.factory import load_platform_catalog
from spark.errors import JarNotFoundError
from spark.jars import find_jdbc_driver_jar
from spark.jobs import expire_snapshots, rewrite_data_files
from tests.integration.catalog.backends import postgres_available, postgres_database
from tests.integration.spark.conftest import (
    Platform,
    append_with_offsets,
    batch,
    checksum,
    data_file_count,
    small_append_table,
    spark_rows,
    start_spark,
)

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    try:
        find_jdbc_driver_jar("postgresql")
    except JarNotFoundError as exc:
        pytest.fail(str(exc))
    if not postgres_available():
        pytest.fail("PostgreSQL is not running on 127.0.0.1:5432")
    with postgres_database() as url:
        settings = CatalogSettings(data_dir=tmp_path_factory.mktemp("pg-platform"), uri=url)
        catalog = load_platform_catalog(settings)
        yield Platform(settings, catalog, settings.data_dir)
        catalog.engine.dispose()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def spark(platform: Platform) -> Iterator[Any]:
    session = start_spark(platform.settings)
    yield session
    session.stop()


def test_spark_compacts_a_table_of_a_postgresql_catalog_while_pyiceberg_commits(
    spark: Any, platform: Platform
) -> None:
    table = small_append_table(platform.catalog, "pg.events", commits=8)
    before = checksum(table.scan().to_arrow())
    assert checksum(spark_rows(spark, "pg.events")) == before
    rewrite_data_files(spark, "tidelake", "pg.events")
    assert data_file_count(table) == 1
    table = append_with_offsets(platform.catalog.load_table("pg.events"), batch(80, 10), 90)
    expire_snapshots(spark, "tidelake", "pg.events", retain_last=1)
    table.refresh()
    assert len(table.metadata.snapshots) == 1
    after = checksum(table.scan().to_arrow())
    assert after[0] == 90 and checksum(spark_rows(spark, "pg.events")) == after
