"""The Spark configuration that wires a session to the platform catalog (no JVM needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog.config import CatalogSettings
from spark.config import SparkSettings
from spark.errors import SparkJobError
from spark.jars import SparkJars
from spark.session import spark_catalog_conf, spark_session_conf, spark_submit_arguments

_JARS = SparkJars(("/j/iceberg.jar",), ("/j/sqlite-jdbc.jar",))


def test_embedded_sql_catalog_becomes_jdbc_catalog_on_the_same_sqlite_file(tmp_path: Path) -> None:
    conf = spark_catalog_conf(CatalogSettings(data_dir=tmp_path))
    db = (tmp_path.resolve() / "catalog.db").as_posix()
    assert conf["spark.sql.catalog.tidelake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.tidelake.type"] == "jdbc"
    assert conf["spark.sql.catalog.tidelake.uri"] == f"jdbc:sqlite:{db}"
    assert conf["spark.sql.catalog.tidelake.jdbc.schema-version"] == "V1"
    assert conf["spark.sql.catalog.tidelake.jdbc.init-catalog-tables"] == "false"
    assert (
        conf["spark.sql.catalog.tidelake.warehouse"] == (tmp_path.resolve() / "warehouse").as_uri()
    )


def test_postgresql_catalog_url_becomes_jdbc_url_with_credentials(tmp_path: Path) -> None:
    settings = CatalogSettings(
        data_dir=tmp_path, uri="postgresql+psycopg2://alice:s%40cret@db.local:5433/lake"
    )
    conf = spark_catalog_conf(settings)
    assert conf["spark.sql.catalog.tidelake.uri"] == "jdbc:postgresql://db.local:5433/lake"
    assert conf["spark.sql.catalog.tidelake.jdbc.user"] == "alice"
    assert conf["spark.sql.catalog.tidelake.jdbc.password"] == "s@cret"


def test_in_memory_sqlite_cannot_be_shared_with_spark(tmp_path: Path) -> None:
    with pytest.raises(SparkJobError):
        spark_catalog_conf(CatalogSettings(data_dir=tmp_path, uri="sqlite:///:memory:"))


def test_rest_hive_and_glue_catalogs_map_to_iceberg_catalogs(tmp_path: Path) -> None:
    rest = spark_catalog_conf(
        CatalogSettings(type="rest", uri="http://127.0.0.1:8181", token="t", name="lake")
    )
    assert rest["spark.sql.catalog.lake.type"] == "rest"
    assert rest["spark.sql.catalog.lake.uri"] == "http://127.0.0.1:8181"
    assert rest["spark.sql.catalog.lake.token"] == "t"
    hive = spark_catalog_conf(
        CatalogSettings(type="hive", hive_uri="thrift://127.0.0.1:9083", data_dir=tmp_path)
    )
    assert hive["spark.sql.catalog.tidelake.type"] == "hive"
    assert hive["spark.sql.catalog.tidelake.uri"] == "thrift://127.0.0.1:9083"
    glue = spark_catalog_conf(
        CatalogSettings(type="glue", glue_region="eu-west-1", warehouse="s3://b/w")
    )
    assert (
        glue["spark.sql.catalog.tidelake.catalog-impl"] == "org.apache.iceberg.aws.glue.GlueCatalog"
    )
    assert glue["spark.sql.catalog.tidelake.io-impl"] == "org.apache.iceberg.hadoop.HadoopFileIO"


def test_session_conf_puts_jdbc_driver_on_driver_class_path_and_sets_default_catalog(
    tmp_path: Path,
) -> None:
    spark = SparkSettings(packages=["org.example:x:1"], conf={"spark.executor.memory": "2g"})
    conf = spark_session_conf(CatalogSettings(data_dir=tmp_path), spark, _JARS)
    assert conf["spark.jars"] == "/j/iceberg.jar"
    assert conf["spark.driver.extraClassPath"] == "/j/sqlite-jdbc.jar"
    assert conf["spark.jars.packages"] == "org.example:x:1"
    assert conf["spark.sql.defaultCatalog"] == "tidelake"
    assert conf["spark.executor.memory"] == "2g"
    assert "IcebergSparkSessionExtensions" in conf["spark.sql.extensions"]


def test_s3_warehouse_reads_through_s3a_with_the_configured_endpoint(tmp_path: Path) -> None:
    settings = CatalogSettings(
        data_dir=tmp_path,
        warehouse="s3://lake/warehouse",
        s3_endpoint="http://127.0.0.1:9000",
        s3_access_key_id="k",
        s3_secret_access_key="s",
    )
    conf = spark_session_conf(settings, SparkSettings(), _JARS)
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.access.key"] == "k"


def test_catalog_name_override_renames_the_spark_catalog(tmp_path: Path) -> None:
    conf = spark_catalog_conf(CatalogSettings(data_dir=tmp_path), SparkSettings(catalog_name="x"))
    assert conf["spark.sql.catalog.x.type"] == "jdbc"


def test_spark_submit_arguments_carry_jars_and_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("spark.session.discover_jars", lambda **_: _JARS)
    args = spark_submit_arguments(CatalogSettings(data_dir=tmp_path))
    assert args[:2] == ["--master", "local[*]"]
    assert args[args.index("--jars") + 1] == "/j/iceberg.jar"
    assert args[args.index("--driver-class-path") + 1] == "/j/sqlite-jdbc.jar"
    assert "spark.sql.catalog.tidelake.type=jdbc" in args
