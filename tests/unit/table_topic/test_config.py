"""table.topic.* configs: validation, AutoMQ aliases, parsing."""

from __future__ import annotations

import pytest

from ingest.log.topic_config import InvalidConfigError, TopicConfigRegistry
from table_topic.config import (
    ConvertType,
    ErrorsTolerance,
    PartitionField,
    TableTopicConfig,
    TransformType,
    parse_partition_by,
    register_table_topic_configs,
)
from table_topic.settings import TableTopicSettings


@pytest.fixture
def registry() -> TopicConfigRegistry:
    reg = TopicConfigRegistry.default()
    register_table_topic_configs(reg)
    return reg


def cfg_of(reg: TopicConfigRegistry, **overrides: str) -> TableTopicConfig:
    return TableTopicConfig.from_topic_config("orders.v1", reg.resolved(reg.validate(overrides)))


def test_defaults(registry: TopicConfigRegistry) -> None:
    c = cfg_of(registry)
    assert not c.enabled
    assert c.commit_interval_ms == 60000
    assert c.value_type is ConvertType.RAW and c.key_type is ConvertType.RAW
    assert c.transform is TransformType.NONE
    assert c.errors_tolerance is ErrorsTolerance.INVALID_DATA
    assert c.dlq_topic == "orders.v1.dlq"
    assert c.value_subject == "orders.v1-value"
    assert c.identifier() == ("default", "orders_v1")
    assert c.expire_snapshots and c.expire_retain_last == 1


def test_automq_aliases_store_the_tidelake_name(registry: TopicConfigRegistry) -> None:
    valid = registry.validate(
        {
            "automq.table.topic.enable": "true",
            "automq.table.topic.commit.interval.ms": "5000",
            "automq.table.topic.convert.value.type": "by_schema_id",
            "automq.table.topic.transform.value.type": "flatten",
            "automq.table.topic.namespace": "lake",
            "automq.table.topic.expire.snapshot.enabled": "false",
        }
    )
    assert set(valid) == {
        "table.topic.enable",
        "table.topic.commit.interval.ms",
        "table.topic.convert.value.type",
        "table.topic.transform.value.type",
        "table.topic.namespace",
        "table.topic.expire.snapshots.enable",
    }
    c = TableTopicConfig.from_topic_config("t", registry.resolved(valid))
    assert c.enabled and c.commit_interval_ms == 5000 and c.namespace == "lake"
    assert not c.expire_snapshots


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("table.topic.commit.interval.ms", "999"),
        ("table.topic.commit.interval.ms", "soon"),
        ("table.topic.convert.value.type", "avro"),
        ("table.topic.transform.value.type", "explode"),
        ("table.topic.errors.tolerance", "some"),
        ("table.topic.partition.by", "[weekday(ts)]"),
        ("table.topic.partition.by", "[bucket(id)]"),
        ("table.topic.enable", "yes"),
        ("table.topic.namespace", "bad namespace"),
        ("table.topic.id.columns", "a b"),
    ],
)
def test_invalid_values_are_refused(registry: TopicConfigRegistry, key: str, value: str) -> None:
    with pytest.raises(InvalidConfigError):
        registry.validate({key: value})


def test_partition_by_forms() -> None:
    assert parse_partition_by(
        "[day(_kafka_timestamp), bucket(id, 16), truncate(10, name), region]"
    ) == [
        PartitionField("day", "_kafka_timestamp"),
        PartitionField("bucket", "id", 16),
        PartitionField("truncate", "name", 10),
        PartitionField("identity", "region"),
    ]
    assert parse_partition_by("bucket(16, id)") == [PartitionField("bucket", "id", 16)]
    assert parse_partition_by("") == []


def test_settings_give_the_interval_default(registry: TopicConfigRegistry) -> None:
    reg = TopicConfigRegistry.default()
    register_table_topic_configs(
        reg, TableTopicSettings(default_commit_interval_ms=2000, default_namespace="lake")
    )
    c = TableTopicConfig.from_topic_config("t", reg.resolved({}))
    assert c.commit_interval_ms == 2000 and c.namespace == "lake"


def test_keyed_needs_id_columns_and_upsert_or_cdc(registry: TopicConfigRegistry) -> None:
    assert not cfg_of(registry, **{"table.topic.upsert.enable": "true"}).keyed
    assert cfg_of(
        registry, **{"table.topic.upsert.enable": "true", "table.topic.id.columns": "id"}
    ).keyed
    assert cfg_of(
        registry, **{"table.topic.cdc.field": "op", "table.topic.id.columns": "[a, b]"}
    ).id_columns == (
        "a",
        "b",
    )
