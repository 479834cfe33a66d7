"""Settings of Tidelake's Spark sessions and jobs (environment prefix ``TIDELAKE_SPARK_``)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["SparkSettings"]


class SparkSettings(BaseSettings):
    """How to start Spark. ``master`` is ``local[*]`` unless a cluster URL is given."""

    model_config = SettingsConfigDict(env_prefix="TIDELAKE_SPARK_", extra="forbid")

    master: str = "local[*]"
    app_name: str = "tidelake"
    # The Spark catalog name; empty means the platform catalog's name (for the JDBC
    # catalog it must match: Iceberg keys rows of the shared database by it).
    catalog_name: str | None = None
    driver_memory: str = "1g"
    shuffle_partitions: int = 4
    log_level: str = "WARN"
    # Further jars (paths or URLs) and Maven coordinates for users with Maven access,
    # e.g. org.apache.iceberg:iceberg-aws-bundle:1.10.0 for S3FileIO and Glue on Spark.
    jars: list[str] = Field(default_factory=list)
    packages: list[str] = Field(default_factory=list)
    # s3 warehouses: "hadoop" reads through s3a (hadoop-aws from sagemaker-pyspark);
    # "s3" uses Iceberg's S3FileIO (needs AWS SDK v2 via ``packages``).
    s3_file_io: str = "hadoop"
    s3_path_style: bool = True
    # Any further Spark configuration, applied last.
    conf: dict[str, str] = Field(default_factory=dict)
