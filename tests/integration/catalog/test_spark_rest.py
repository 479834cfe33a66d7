"""Spark 3.5 with Iceberg's REST catalog against Tidelake's built-in REST catalog."""

from __future__ import annotations

import glob
import os
import shutil
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

pytestmark = pytest.mark.spark


def _iceberg_jar() -> str | None:
    try:
        import snowpark_connect_deps_iceberg as deps
    except ImportError:
        return None
    jars = glob.glob(
        os.path.join(os.path.dirname(deps.__file__), "jars", "iceberg-spark-runtime-3.5_2.12-*.jar")
    )
    return jars[0] if jars else None


@pytest.fixture(scope="module")
def spark(server_url: str) -> Iterator[Any]:
    jar = _iceberg_jar()
    if jar is None or shutil.which("java") is None:
        pytest.fail(
            "needs Java, pyspark==3.5.9 and snowpark-connect-deps-iceberg==1.0.2: run scripts/dev.sh install"
        )
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("tidelake-rest-catalog-test")
        .config("spark.jars", jar)
        .config(
            "spark.sql.extensions",
            "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        )
        .config("spark.sql.catalog.tl", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.tl.type", "rest")
        .config("spark.sql.catalog.tl.uri", server_url)
        .config("spark.sql.catalog.tl.cache-enabled", "false")  # see commits made by pyiceberg
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def spark_ns(spark: Any) -> str:
    name = f"spark_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE NAMESPACE tl.{name}")
    return name


def test_spark_creates_writes_reads_and_evolves(
    spark: Any, spark_ns: str, rest: RestCatalog, http: Any
) -> None:
    ns = spark_ns
    spark.sql(
        f"CREATE TABLE tl.{ns}.orders (id BIGINT, item STRING, ts TIMESTAMP) USING iceberg "
        "PARTITIONED BY (days(ts)) TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    spark.sql(
        f"INSERT INTO tl.{ns}.orders VALUES (1, 'tea', TIMESTAMP '2026-01-01 10:00:00'), "
        "(2, 'cake', TIMESTAMP '2026-01-02 11:00:00'), (3, 'scone', TIMESTAMP '2026-01-02 12:00:00')"
    )
    assert spark.sql(f"SELECT count(*) FROM tl.{ns}.orders").collect()[0][0] == 3

    spark.sql(f"ALTER TABLE tl.{ns}.orders ADD COLUMN qty INT")
    spark.sql(f"INSERT INTO tl.{ns}.orders VALUES (4, 'jam', TIMESTAMP '2026-01-03 09:00:00', 5)")
    spark.sql(f"DELETE FROM tl.{ns}.orders WHERE id = 2")

    # pyiceberg reads what Spark wrote, through the same REST catalog.
    table = rest.load_table((ns, "orders"))
    assert [f.name for f in table.schema().fields] == ["id", "item", "ts", "qty"]
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == [1, 3, 4] and rows[-1]["qty"] == 5

    # The browse API sees Spark's position deletes.
    stats = http.get(f"/api/v1/catalog/tables/{ns}/orders/files").json()
    assert stats["position_delete_files"] >= 1 and stats["delete_records"] >= 1

    # Spark reads what pyiceberg appends.
    table.append(
        pa.table(
            {
                "id": pa.array([5], pa.int64()),
                "item": ["bun"],
                "ts": pa.array([None], pa.timestamp("us", tz="UTC")),
                "qty": pa.array([1], pa.int32()),
            }
        )
    )
    ids = [r[0] for r in spark.sql(f"SELECT id FROM tl.{ns}.orders ORDER BY id").collect()]
    assert ids == [1, 3, 4, 5]


def test_spark_ctas_rename_and_drop(spark: Any, spark_ns: str, rest: RestCatalog) -> None:
    ns = spark_ns
    spark.sql(
        f"CREATE TABLE tl.{ns}.src USING iceberg AS SELECT id, CAST(id AS STRING) AS s FROM range(10)"
    )
    spark.sql(f"CREATE TABLE tl.{ns}.copy USING iceberg AS SELECT * FROM tl.{ns}.src WHERE id < 4")
    assert rest.load_table((ns, "copy")).scan().to_arrow().num_rows == 4
    # Spark passes the new name without resolving the catalog part.
    spark.sql(f"ALTER TABLE tl.{ns}.copy RENAME TO {ns}.copy2")
    assert rest.table_exists((ns, "copy2")) and not rest.table_exists((ns, "copy"))
    spark.sql(f"DROP TABLE tl.{ns}.copy2 PURGE")
    assert not rest.table_exists((ns, "copy2"))
    names = {r[1] for r in spark.sql(f"SHOW TABLES IN tl.{ns}").collect()}
    assert names == {"src"}


def test_spark_nested_namespaces(spark: Any, spark_ns: str, rest: RestCatalog) -> None:
    ns = spark_ns
    spark.sql(f"CREATE NAMESPACE tl.{ns}.inner")
    assert [r[0] for r in spark.sql(f"SHOW NAMESPACES IN tl.{ns}").collect()] == [f"{ns}.inner"]
    spark.sql(f"CREATE TABLE tl.{ns}.inner.t (id INT) USING iceberg")
    spark.sql(f"INSERT INTO tl.{ns}.inner.t VALUES (1), (2)")
    assert rest.load_table((ns, "inner", "t")).scan().to_arrow().num_rows == 2
    assert rest.list_namespaces(ns) == [(ns, "inner")]


def test_spark_namespaces_with_percent_and_spaces(
    spark: Any, spark_ns: str, rest: RestCatalog
) -> None:
    # Iceberg's Java client encodes the parent query parameter once, as the spec says.
    top = f"`{spark_ns}%25 x`"
    spark.sql(f"CREATE NAMESPACE tl.{top}")
    spark.sql(f"CREATE NAMESPACE tl.{top}.`in%ner`")
    listed = [r[0] for r in spark.sql(f"SHOW NAMESPACES IN tl.{top}").collect()]
    assert listed == [f"{top}.`in%ner`"]
    assert rest.list_namespaces(f"{spark_ns}%25 x") == [(f"{spark_ns}%25 x", "in%ner")]
    spark.sql(f"CREATE TABLE tl.{top}.`in%ner`.t (id INT) USING iceberg")
    spark.sql(f"INSERT INTO tl.{top}.`in%ner`.t VALUES (1)")
    assert rest.load_table((f"{spark_ns}%25 x", "in%ner", "t")).scan().to_arrow().num_rows == 1
