"""A warehouse on S3 (moto's server): pyiceberg writes, Spark reads and compacts through s3a.

Needs ``hadoop-aws`` and the AWS SDK bundle, which come from the PyPI sdist
``sagemaker-pyspark==1.4.5`` installed with ``--no-deps`` (its own dependencies
would downgrade pyspark). Without them this module is skipped with that reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from catalog.config import CatalogSettings
from catalog.factory import load_platform_catalog
from spark.jars import find_hadoop_aws_jars
from spark.jobs import rewrite_data_files
from tests.integration.catalog.backends import AWS_ENV, make_bucket, moto_server
from tests.integration.spark.conftest import (
    Platform,
    checksum,
    data_file_count,
    small_append_table,
    spark_rows,
    start_spark,
)

pytestmark = [pytest.mark.spark]


def test_hadoop_aws_is_installed() -> None:
    # scripts/dev.sh installs it; without it every s3a test below fails anyway.
    assert find_hadoop_aws_jars(), "s3a needs hadoop-aws: pip install --no-deps sagemaker-pyspark==1.4.5"


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    for key, value in AWS_ENV.items():
        os.environ.setdefault(key, value)
    with moto_server() as endpoint:
        make_bucket(endpoint, "lake")
        settings = CatalogSettings(
            data_dir=tmp_path_factory.mktemp("s3-platform"),
            warehouse="s3://lake/warehouse",
            s3_endpoint=endpoint,
            s3_region="us-east-1",
            s3_access_key_id="testing",
            s3_secret_access_key="testing",
            # pyarrow 26's S3 multipart completion trips over moto; fsspec's s3fs does not.
            extra_properties={"py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO"},
        )
        yield Platform(settings, load_platform_catalog(settings), settings.data_dir)


@pytest.fixture(scope="module")
def spark(platform: Platform) -> Iterator[Any]:
    session = start_spark(platform.settings)
    yield session
    session.stop()


def test_spark_reads_and_compacts_a_table_on_s3(spark: Any, platform: Platform) -> None:
    table = small_append_table(platform.catalog, "lake.events", commits=6)
    assert table.location().startswith("s3://lake/warehouse/")
    before = checksum(table.scan().to_arrow())
    assert checksum(spark_rows(spark, "lake.events")) == before
    result = rewrite_data_files(spark, "tidelake", "lake.events")
    assert result.metrics["rewritten_data_files_count"] == 6
    assert data_file_count(table) == 1
    assert checksum(table.scan().to_arrow()) == before  # pyiceberg reads Spark's file on S3
