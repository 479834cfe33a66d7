"""A SparkSession wired to the platform's Iceberg catalog.

``create_spark_session(catalog_settings, spark_settings)`` finds the Iceberg
runtime and JDBC driver jars in installed packages (see :mod:`spark.jars`) and
registers the platform catalog in Spark under its own name:

* ``sql`` (pyiceberg's ``SqlCatalog``) becomes Iceberg's JDBC catalog on the same
  database (SQLite file or PostgreSQL), so Spark and pyiceberg see the same tables;
* ``rest`` and ``hive`` map to Iceberg's REST and Hive catalogs;
* ``glue`` maps to Iceberg's ``GlueCatalog``, which needs the AWS SDK v2 from
  ``spark.jars.packages`` (``SparkSettings.packages``).

Under ``spark-submit`` the session already exists; the catalog settings are then
applied at run time (pass the JDBC driver with ``--driver-class-path``; see
``spark_submit_arguments``).
"""

from __future__ import annotations

import os
import sys
from typing import Any
from urllib.parse import unquote, urlparse

from catalog.config import CatalogSettings, CatalogType
from catalog.factory import catalog_properties
from spark.config import SparkSettings
from spark.errors import SparkJobError, SparkUnavailableError
from spark.jars import SparkJars, discover_jars, require_java

__all__ = [
    "create_spark_session",
    "ensure_catalog_tables",
    "spark_catalog_conf",
    "spark_catalog_name",
    "spark_session_conf",
    "spark_submit_arguments",
]

_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


def spark_catalog_name(catalog: CatalogSettings, spark: SparkSettings | None = None) -> str:
    return (spark.catalog_name if spark and spark.catalog_name else None) or catalog.name


def _jdbc_url(sqlalchemy_url: str) -> tuple[str, str, dict[str, str]]:
    """(driver kind, JDBC URL, extra properties) for a SQLAlchemy URL."""
    parsed = urlparse(sqlalchemy_url)
    scheme = parsed.scheme.split("+", 1)[0]
    if scheme == "sqlite":
        path = unquote(sqlalchemy_url.split("sqlite://", 1)[1].split("?", 1)[0])[1:]
        if path in ("", ":memory:"):
            raise SparkJobError("Spark cannot share an in-memory SQLite catalog")
        # busy_timeout: wait for a pyiceberg commit in progress instead of failing at once.
        pragmas = {"jdbc.busy_timeout": "30000"}
        return "sqlite", f"jdbc:sqlite:{path}", pragmas
    if scheme in ("postgresql", "postgres"):
        props: dict[str, str] = {}
        if parsed.username:
            props["jdbc.user"] = unquote(parsed.username)
        if parsed.password:
            props["jdbc.password"] = unquote(parsed.password)
        host = parsed.hostname or "127.0.0.1"
        port = f":{parsed.port}" if parsed.port else ""
        query = f"?{parsed.query}" if parsed.query else ""
        return "postgresql", f"jdbc:postgresql://{host}{port}{parsed.path}{query}", props
    raise SparkJobError(f"Spark's JDBC catalog does not support {scheme!r} databases")


def _jdbc_kind(catalog: CatalogSettings) -> str | None:
    if catalog.type is not CatalogType.SQL:
        return None
    return _jdbc_url(catalog_properties(catalog)["uri"])[0]


def _s3_io(catalog: CatalogSettings, spark: SparkSettings, warehouse: str | None) -> dict[str, str]:
    """Iceberg FileIO settings for S3 warehouses (empty for local ones)."""
    if not (warehouse or "").startswith(("s3://", "s3a://")) and not catalog.s3_endpoint:
        return {}
    if spark.s3_file_io == "s3":
        props = {"io-impl": "org.apache.iceberg.aws.s3.S3FileIO"}
        for key, value in (
            ("s3.endpoint", catalog.s3_endpoint),
            ("s3.access-key-id", catalog.s3_access_key_id),
            ("s3.secret-access-key", catalog.s3_secret_access_key),
            ("client.region", catalog.s3_region),
        ):
            if value:
                props[key] = value
        if spark.s3_path_style:
            props["s3.path-style-access"] = "true"
        return props
    return {"io-impl": "org.apache.iceberg.hadoop.HadoopFileIO"}


def spark_catalog_conf(
    catalog: CatalogSettings, spark: SparkSettings | None = None
) -> dict[str, str]:
    """``spark.sql.catalog.<name>.*`` entries that register the platform catalog in Spark."""
    spark = spark or SparkSettings()
    name = spark_catalog_name(catalog, spark)
    props = catalog_properties(catalog)
    # No table cache: streaming commits land every few seconds and queries and jobs
    # must see them (Spark's default caches a loaded table for 30 s).
    out: dict[str, str] = {"": "org.apache.iceberg.spark.SparkCatalog", "cache-enabled": "false"}
    warehouse = props.get("warehouse")
    kind = catalog.type
    if kind is CatalogType.SQL:
        _, url, extra = _jdbc_url(props["uri"])
        # pyiceberg's SqlCatalog creates the catalog tables (``ensure_catalog_tables``);
        # Iceberg's own initialisation leaves a SQLite transaction open, which locks
        # pyiceberg out of the database until the session ends, so it is turned off.
        out.update(
            {
                "type": "jdbc",
                "uri": url,
                "jdbc.schema-version": "V1",
                "jdbc.init-catalog-tables": "false",
                **extra,
            }
        )
    elif kind in (CatalogType.REST, CatalogType.NESSIE, CatalogType.S3TABLES):
        # S3 Tables and Nessie serve the Iceberg REST protocol (catalog.factory)
        out.update({"type": "rest", "uri": props["uri"]})
        for key in ("token", "credential", "oauth2-server-uri", "scope"):
            if key in props:
                out[key] = props[key]
        out.update({k: v for k, v in props.items() if k.startswith(("header.", "rest."))})
    elif kind is CatalogType.HIVE:
        out.update({"type": "hive", "uri": props["uri"]})
    else:
        out["catalog-impl"] = "org.apache.iceberg.aws.glue.GlueCatalog"
        if catalog.glue_catalog_id:
            out["glue.id"] = catalog.glue_catalog_id
        if catalog.glue_endpoint:
            out["glue.endpoint"] = catalog.glue_endpoint
        if catalog.glue_region:
            out["client.region"] = catalog.glue_region
    if warehouse:
        out["warehouse"] = warehouse
    out.update(_s3_io(catalog, spark, warehouse))
    prefix = f"spark.sql.catalog.{name}"
    return {(f"{prefix}.{k}" if k else prefix): v for k, v in out.items()}


def _hadoop_s3a_conf(catalog: CatalogSettings, spark: SparkSettings) -> dict[str, str]:
    conf = {
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.path.style.access": str(spark.s3_path_style).lower(),
    }
    if catalog.s3_endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = catalog.s3_endpoint
        if catalog.s3_endpoint.startswith("http://"):
            conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = "false"
    if catalog.s3_region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = catalog.s3_region
    if catalog.s3_access_key_id and catalog.s3_secret_access_key:
        conf["spark.hadoop.fs.s3a.access.key"] = catalog.s3_access_key_id
        conf["spark.hadoop.fs.s3a.secret.key"] = catalog.s3_secret_access_key
        conf["spark.hadoop.fs.s3a.aws.credentials.provider"] = (
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        )
    return conf


def _needs_s3a(catalog: CatalogSettings, spark: SparkSettings) -> bool:
    warehouse = catalog_properties(catalog).get("warehouse") or ""
    return spark.s3_file_io == "hadoop" and (
        warehouse.startswith(("s3://", "s3a://")) or bool(catalog.s3_endpoint)
    )


def spark_session_conf(
    catalog: CatalogSettings, spark: SparkSettings | None = None, jars: SparkJars | None = None
) -> dict[str, str]:
    """The whole Spark configuration of a Tidelake session (jars, extensions, catalog)."""
    spark = spark or SparkSettings()
    s3a = _needs_s3a(catalog, spark)
    jars = jars or discover_jars(jdbc=_jdbc_kind(catalog), s3a=s3a)
    conf: dict[str, str] = {
        "spark.sql.extensions": _EXTENSIONS,
        "spark.jars": ",".join([*jars.jars, *spark.jars]),
        "spark.driver.memory": spark.driver_memory,
        "spark.sql.shuffle.partitions": str(spark.shuffle_partitions),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
    }
    if jars.driver_class_path:
        conf["spark.driver.extraClassPath"] = os.pathsep.join(jars.driver_class_path)
    if spark.packages:
        conf["spark.jars.packages"] = ",".join(spark.packages)
    if spark.master.startswith("local"):
        conf.update(
            {
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.ui.enabled": "false",
            }
        )
    if s3a:
        conf.update(_hadoop_s3a_conf(catalog, spark))
    conf.update(spark_catalog_conf(catalog, spark))
    conf["spark.sql.defaultCatalog"] = spark_catalog_name(catalog, spark)
    conf.update(spark.conf)
    return conf


def spark_submit_arguments(
    catalog: CatalogSettings, spark: SparkSettings | None = None
) -> list[str]:
    """``spark-submit`` flags that give a job script the same session (``--jars``, ``--conf``)."""
    spark = spark or SparkSettings()
    conf = spark_session_conf(catalog, spark)
    args = ["--master", spark.master]
    if conf.get("spark.jars"):
        args += ["--jars", conf.pop("spark.jars")]
    if "spark.driver.extraClassPath" in conf:
        args += ["--driver-class-path", conf.pop("spark.driver.extraClassPath")]
    if "spark.jars.packages" in conf:
        args += ["--packages", conf.pop("spark.jars.packages")]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    return args


def ensure_catalog_tables(catalog: CatalogSettings) -> None:
    """Create the SQL catalog's tables (pyiceberg does on open) before Spark uses them."""
    if catalog.type is CatalogType.SQL:
        from catalog.factory import load_platform_catalog

        load_platform_catalog(catalog)


def create_spark_session(catalog: CatalogSettings, spark: SparkSettings | None = None) -> Any:
    """Start (or join) a SparkSession with the platform catalog as its default catalog.

    Raises :class:`SparkUnavailableError` when Java, pyspark or a needed jar is missing.
    """
    spark = spark or SparkSettings()
    require_java()
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise SparkUnavailableError(
            "pyspark is not installed: pip install 'tidelake[spark]'"
        ) from exc
    conf = spark_session_conf(catalog, spark)
    ensure_catalog_tables(catalog)
    if spark.master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    active = SparkContext._active_spark_context
    builder = SparkSession.builder
    if active is None:
        builder = builder.master(spark.master).appName(spark.app_name)
        for key, value in conf.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
    else:  # spark-submit or an existing session: only SQL-level settings can change now
        session = builder.getOrCreate()
        for key, value in conf.items():
            if key.startswith("spark.sql.") and key != "spark.sql.extensions":
                session.conf.set(key, value)
    session.sparkContext.setLogLevel(spark.log_level)
    return session
