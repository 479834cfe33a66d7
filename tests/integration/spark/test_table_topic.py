"""Spark compacts a real table topic while ``tidelake serve`` keeps committing to it.

A Kafka client produces to a table topic with 1 s commits; Spark, on the same
SQLite catalog, reads the table and compacts it twice in the middle of the
stream. Every record must be in the table exactly once, and the coordinator's
offsets (walked back past the compaction snapshots) must match what was produced.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from catalog.config import CatalogSettings
from spark.jobs import rewrite_data_files
from tests.integration.spark.conftest import start_spark
from tests.integration.table_topic.conftest import TT_ENV, TableTopics
from tests.support.platform import TidelakeProcess

pytestmark = pytest.mark.spark

TOPIC = "clicks"
TABLE = "default.clicks"
BATCHES = 24
PER_BATCH = 25  # per partition


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidelakeProcess]:
    proc = TidelakeProcess(Path(tmp_path_factory.mktemp("tt-spark")) / "data", env=dict(TT_ENV))
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def spark(served: TidelakeProcess) -> Iterator[Any]:
    session = start_spark(CatalogSettings(data_dir=served.data_dir))
    yield session
    session.stop()


def test_compaction_during_table_topic_commits_keeps_every_record_exactly_once(
    served: TidelakeProcess, spark: Any
) -> None:
    tt = TableTopics(served)
    tt.create_topic(
        TOPIC,
        partitions=2,
        **{"table.topic.convert.value.type": "string", "table.topic.convert.key.type": "string"},
    )
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            for b in range(BATCHES):
                for partition in (0, 1):
                    records = [
                        (f"p{partition}".encode(), f"{partition}:{b * PER_BATCH + i}".encode())
                        for i in range(PER_BATCH)
                    ]
                    tt.produce(TOPIC, records, partition=partition)
                time.sleep(0.4)
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        tt.wait_rows(TOPIC, 4 * PER_BATCH, timeout=60)  # a few commits have landed
        compactions = []
        for _ in range(2):
            result = rewrite_data_files(spark, "tidelake", TABLE, min_input_files=2)
            compactions.append(result.metrics.get("rewritten_data_files_count", 0))
            time.sleep(1.5)
    finally:
        producer.join(timeout=120)
    assert not errors, errors
    assert sum(compactions) >= 2, compactions  # counts are reported only after a commit

    total = 2 * BATCHES * PER_BATCH
    rows = tt.wait_rows(TOPIC, total, timeout=60)
    assert rows.num_rows == total  # nothing duplicated
    pairs = {(r["_kafka_partition"], r["_kafka_offset"]) for r in rows.to_pylist()}
    assert pairs == {(p, o) for p in (0, 1) for o in range(BATCHES * PER_BATCH)}
    spark_rows = spark.sql(
        f"SELECT _kafka_partition AS p, _kafka_offset AS o, value FROM {TABLE}"
    ).collect()
    assert len(spark_rows) == total
    assert {(r["p"], r["o"]) for r in spark_rows} == pairs
    assert all(r["value"] == f"{r['p']}:{r['o']}" for r in spark_rows)

    from table_topic.commit import committed_offsets

    table = tt.table(TOPIC)
    assert committed_offsets(table) == {0: BATCHES * PER_BATCH, 1: BATCHES * PER_BATCH}
