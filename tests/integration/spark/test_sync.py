"""Catalog sync into Glue (moto's server), a real Hive Metastore and Tidelake's REST catalog.

The platform catalog is the embedded SQLite one; each target gets entries pointing at
the same metadata files. pyiceberg reads every mirror; Spark reads the Hive and REST
mirrors (Spark's Glue catalog needs AWS SDK v2, which is not installable here).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog import Catalog

from catalog.app import create_app
from catalog.config import CatalogSettings
from catalog.factory import load_platform_catalog
from spark.config import SparkSettings
from spark.errors import SparkUnavailableError
from spark.session import create_spark_session, spark_catalog_conf
from spark.sync import sync_catalogs
from tests.integration.catalog.backends import AWS_ENV, moto_server
from tests.integration.catalog.conftest import serve
from tests.integration.spark.conftest import (
    Platform,
    append_with_offsets,
    batch,
    checksum,
    small_append_table,
    spark_rows,
)
from tests.support.hive_metastore import hive_metastore

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def glue_settings() -> Iterator[CatalogSettings]:
    for key, value in AWS_ENV.items():
        os.environ.setdefault(key, value)
    with moto_server() as url:
        yield CatalogSettings(
            type="glue", name="mirror_glue", glue_endpoint=url, glue_region="us-east-1"
        )


@pytest.fixture(scope="module")
def hive_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogSettings]:
    with hive_metastore(tmp_path_factory.mktemp("hms")) as uri:
        yield CatalogSettings(
            type="hive",
            name="mirror_hive",
            hive_uri=uri,
            data_dir=tmp_path_factory.mktemp("hms-warehouse"),
        )


@pytest.fixture(scope="module")
def rest_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CatalogSettings]:
    app = create_app(CatalogSettings(data_dir=tmp_path_factory.mktemp("external-rest")))
    with serve(app) as url:
        yield CatalogSettings(type="rest", name="mirror_rest", uri=url)


@pytest.fixture(scope="module")
def mirrors(
    glue_settings: CatalogSettings, hive_settings: CatalogSettings, rest_settings: CatalogSettings
) -> dict[str, Catalog]:
    return {s.name: load_platform_catalog(s) for s in (glue_settings, hive_settings, rest_settings)}


@pytest.fixture(scope="module")
def spark(
    platform: Platform, hive_settings: CatalogSettings, rest_settings: CatalogSettings
) -> Iterator[Any]:
    extra: dict[str, str] = {}
    for settings in (hive_settings, rest_settings):
        extra.update(spark_catalog_conf(settings))
    try:
        session = create_spark_session(
            platform.settings,
            SparkSettings(master="local[2]", shuffle_partitions=2, log_level="ERROR", conf=extra),
        )
    except SparkUnavailableError as exc:
        pytest.fail(f"Spark tests need Java 17, pyspark and the Iceberg runtime: {exc}")
    yield session
    session.stop()


def _owned(platform: Platform) -> str:
    return platform.settings.default_warehouse()


def _location(catalog: Catalog, identifier: str) -> str:
    return catalog.load_table(identifier).metadata_location


def test_sync_registers_tables_and_every_engine_reads_them_through_each_mirror(
    spark: Any, platform: Platform, mirrors: dict[str, Catalog]
) -> None:
    table = small_append_table(platform.catalog, "mirror.events", commits=3)
    small_append_table(platform.catalog, "mirror.clicks", commits=1)
    expected = checksum(table.scan().to_arrow())
    for name, target in mirrors.items():
        report = sync_catalogs(
            platform.catalog, target, namespaces=["mirror"], owned_prefix=_owned(platform)
        )
        assert not report.errors, (name, report.errors)
        assert report.count("register") == 2, name
        assert report.count("create_namespace") == 1, name
        assert _location(target, "mirror.events") == table.metadata_location
        assert checksum(target.load_table("mirror.events").scan().to_arrow()) == expected, name
    for spark_catalog in ("mirror_hive", "mirror_rest"):
        rows = spark_rows(spark, f"{spark_catalog}.mirror.events")
        assert checksum(rows) == expected, spark_catalog


def test_sync_is_idempotent_and_follows_new_commits(
    spark: Any, platform: Platform, mirrors: dict[str, Catalog]
) -> None:
    for target in mirrors.values():
        again = sync_catalogs(
            platform.catalog, target, namespaces=["mirror"], owned_prefix=_owned(platform)
        )
        assert again.changes == [] and again.unchanged == 2 and not again.errors

    table = append_with_offsets(platform.catalog.load_table("mirror.events"), batch(1000, 5), 35)
    expected = checksum(table.scan().to_arrow())
    for name, target in mirrors.items():
        dry = sync_catalogs(
            platform.catalog,
            target,
            namespaces=["mirror"],
            dry_run=True,
            owned_prefix=_owned(platform),
        )
        assert [c.action for c in dry.changes] == ["update"], name
        assert _location(target, "mirror.events") != table.metadata_location
        report = sync_catalogs(
            platform.catalog, target, namespaces=["mirror"], owned_prefix=_owned(platform)
        )
        assert [(c.action, c.table) for c in report.changes] == [("update", "mirror.events")], name
        assert report.unchanged == 1 and not report.errors, (name, report.errors)
        assert _location(target, "mirror.events") == table.metadata_location, name
        assert checksum(target.load_table("mirror.events").scan().to_arrow()) == expected, name
    for spark_catalog in ("mirror_hive", "mirror_rest"):
        assert checksum(spark_rows(spark, f"{spark_catalog}.mirror.events")) == expected


def test_sync_removes_dropped_tables_but_not_foreign_ones(
    platform: Platform, mirrors: dict[str, Catalog], tmp_path: Path
) -> None:
    foreign_dir = tmp_path / "foreign"
    foreign_settings = CatalogSettings(data_dir=foreign_dir)
    foreign = load_platform_catalog(foreign_settings)
    foreign_table = small_append_table(foreign, "mirror.theirs", commits=1)
    for target in mirrors.values():
        target.register_table("mirror.theirs", foreign_table.metadata_location)

    platform.catalog.drop_table("mirror.clicks")
    for name, target in mirrors.items():
        report = sync_catalogs(
            platform.catalog, target, namespaces=["mirror"], owned_prefix=_owned(platform)
        )
        assert [(c.action, c.table) for c in report.changes] == [("drop", "mirror.clicks")], name
        assert not target.table_exists("mirror.clicks"), name
        assert target.table_exists("mirror.theirs"), name
        assert target.table_exists("mirror.events"), name
    # Dropping a mirror entry never deletes the platform's files.
    assert checksum(platform.catalog.load_table("mirror.events").scan().to_arrow())[0] == 35
