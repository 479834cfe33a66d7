"""Delta partition columns from ``table.topic.partition.by``, storage options from
the catalog's FileIO, and the ``table.topic.format`` config."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from ingest.log.topic_config import InvalidConfigError, TopicConfigRegistry
from table_topic.config import PartitionField, TableFormat, register_table_topic_configs
from table_topic.delta.layout import check_source, delta_partitions
from table_topic.delta.location import DeltaLocation, storage_options_from_fileio
from table_topic.delta.sink import delta_type
from table_topic.errors import TableTopicConfigError
from tests.unit.table_topic.test_commit import cfg

TS = pa.array([dt.datetime(2026, 11, 26, 3, 59, tzinfo=dt.UTC), None], pa.timestamp("us", tz="UTC"))


def test_time_transforms_become_readable_derived_columns() -> None:
    fields = (
        PartitionField("year", "ts"),
        PartitionField("month", "ts"),
        PartitionField("day", "ts"),
        PartitionField("hour", "ts"),
    )
    data = pa.table({"ts": TS})
    got = {p.name: p.compute(data).to_pylist() for p in delta_partitions(fields)}
    assert got == {
        "ts_year": [2026, None],
        "ts_month": ["2026-11", None],
        "ts_day": [dt.date(2026, 11, 26), None],
        "ts_hour": ["2026-11-26-03", None],
    }


@pytest.mark.parametrize("transform", ["bucket", "truncate", "void"])
def test_transforms_delta_cannot_express_are_refused_by_name(transform: str) -> None:
    param = 4 if transform in ("bucket", "truncate") else None
    with pytest.raises(TableTopicConfigError, match=f"{transform}\\(id\\)"):
        delta_partitions((PartitionField(transform, "id", param),))


def test_identity_needs_a_top_level_column_of_a_partitionable_type() -> None:
    with pytest.raises(TableTopicConfigError, match="top-level"):
        delta_partitions((PartitionField("identity", "a.b"),))
    (p,) = delta_partitions((PartitionField("identity", "price"),))
    with pytest.raises(TableTopicConfigError, match="cannot partition by 'price'"):
        check_source(p, pa.schema([("price", pa.float64())]))
    with pytest.raises(TableTopicConfigError, match="not in the records"):
        check_source(p, pa.schema([("other", pa.int64())]))


def test_delta_types_are_widened_up_front() -> None:
    t = pa.struct([("n", pa.int32()), ("f", pa.float32()), ("d", pa.decimal128(10, 2))])
    assert delta_type(t) == pa.struct(
        [("n", pa.int64()), ("f", pa.float64()), ("d", pa.decimal128(38, 2))]
    )
    assert delta_type(pa.large_list(pa.large_string())) == pa.list_(pa.string())


def test_storage_options_come_from_the_catalog_fileio() -> None:
    props = {
        "warehouse": "s3://lake/wh",
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.access-key-id": "k",
        "s3.secret-access-key": "s",
        "s3.region": "eu-west-1",
    }
    assert storage_options_from_fileio(props)["AWS_ALLOW_HTTP"] == "true"
    loc = DeltaLocation.resolve("", {}, props)
    assert loc is not None and loc.root == "s3://lake/wh/delta"
    assert loc.storage_options["AWS_ACCESS_KEY_ID"] == "k"
    assert loc.storage_options["AWS_CONDITIONAL_PUT"] == "etag"
    assert loc.table_uri(("shop", "orders")) == "s3://lake/wh/delta/shop/orders"
    # explicit settings win; a REST catalog with no warehouse URL has no default root
    mine = DeltaLocation.resolve("s3a://other/x", {"AWS_REGION": "us-east-2"}, props)
    assert mine is not None and mine.root == "s3://other/x"
    assert mine.storage_options["AWS_REGION"] == "us-east-2"
    assert DeltaLocation.resolve("", {}, {"warehouse": "my-warehouse"}) is None


def test_format_config_is_validated_and_defaults_to_iceberg() -> None:
    reg = TopicConfigRegistry.default()
    register_table_topic_configs(reg)
    assert cfg().format is TableFormat.ICEBERG
    assert cfg(**{"table.topic.format": "BOTH"}).format is TableFormat.BOTH
    with pytest.raises(InvalidConfigError, match="iceberg, delta, both"):
        reg.validate({"table.topic.format": "hudi"})
    assert TableFormat.BOTH.iceberg and TableFormat.BOTH.delta
    assert not TableFormat.DELTA.iceberg and not TableFormat.ICEBERG.delta
