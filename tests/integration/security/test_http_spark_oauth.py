"""Spark's Iceberg REST catalog client against Tidelake's REST catalog with
OAuth2 client credentials: tokens that expire while the session runs (the
Java client refreshes them) and a namespace grant that stops it elsewhere."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from catalog.app import create_app
from catalog.config import CatalogSettings, CatalogType
from spark.config import SparkSettings
from spark.errors import SparkUnavailableError
from spark.session import create_spark_session
from tests.integration.catalog.conftest import serve

pytestmark = pytest.mark.spark

LIFETIME_S = 5


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root: Path = tmp_path_factory.mktemp("spark-oauth")
    served = CatalogSettings(
        data_dir=root / "catalog",
        serve_oauth2_clients={"spark": "spark-secret"},
        serve_oauth2_permissions={"spark": ["write:lake"]},
        serve_token_lifetime_seconds=LIFETIME_S,
    )
    with serve(create_app(served)) as url:
        client = CatalogSettings(
            type=CatalogType.REST,
            name="secured",
            uri=url,
            credential="spark:spark-secret",
            oauth2_server_uri=f"{url}/v1/oauth/tokens",
        )
        try:
            session = create_spark_session(
                client, SparkSettings(master="local[1]", shuffle_partitions=1, log_level="ERROR")
            )
        except SparkUnavailableError as exc:
            pytest.fail(f"Spark tests need Java 17, pyspark and the Iceberg runtime: {exc}")
        try:
            yield session
        finally:
            session.stop()


def test_spark_with_oauth2_credentials_outlives_its_tokens_and_keeps_to_its_namespace(
    spark: Any,
) -> None:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS secured.lake")
    spark.sql("CREATE TABLE secured.lake.events (id BIGINT) USING iceberg")
    spark.sql("INSERT INTO secured.lake.events VALUES (1), (2)")
    time.sleep(LIFETIME_S + 1)  # the first token has expired by now
    spark.sql("INSERT INTO secured.lake.events VALUES (3)")
    assert spark.sql("SELECT count(*) AS c FROM secured.lake.events").collect()[0].c == 3
    with pytest.raises(Exception, match="Forbidden|403|may not write"):
        spark.sql("CREATE NAMESPACE secured.hr")
