"""Every topic config Apache Kafka defines is accepted with Kafka's types and
ranges, so tools and tests that set one of them work against Tidelake, even
where the config describes local segment files or replication that a broker
over shared object storage does not have."""

from __future__ import annotations

import pytest

from ingest.log.topic_config import InvalidConfigError, TopicConfigRegistry

# Apache Kafka 3.9's topic-level configs (TopicConfig / LogConfig).
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.downconversion.enable",
    "message.format.version",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
}


def test_every_kafka_topic_config_is_known_with_its_default() -> None:
    registry = TopicConfigRegistry.default()
    missing = KAFKA_TOPIC_CONFIGS - set(registry.defs)
    assert not missing
    resolved = registry.resolved({})
    assert resolved.get("file.delete.delay.ms") == "60000"
    assert resolved.get("segment.index.bytes") == "10485760"
    assert resolved.get("local.retention.ms") == "-2"


def test_librdkafkas_compaction_topic_configs_are_accepted() -> None:
    # what librdkafka's 0077-compaction test creates its topic with
    configs = {
        "cleanup.policy": "compact",
        "segment.ms": "500",
        "segment.bytes": "1048576",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "86400",
        "file.delete.delay.ms": "10000",
        "max.compaction.lag.ms": "100",
    }
    assert TopicConfigRegistry.default().validate(configs) == configs


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("compression.gzip.level", "0"),
        ("compression.lz4.level", "18"),
        ("compression.zstd.level", "23"),
        ("file.delete.delay.ms", "-1"),
        ("segment.index.bytes", "3"),
        ("preallocate", "maybe"),
        ("local.retention.ms", "-3"),
        ("leader.replication.throttled.replicas", "0:1,two"),
    ],
)
def test_values_out_of_kafkas_range_are_refused(name: str, value: str) -> None:
    with pytest.raises(InvalidConfigError):
        TopicConfigRegistry.default().validate({name: value})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("compression.gzip.level", "-1"),
        ("compression.zstd.level", "-5"),
        ("leader.replication.throttled.replicas", "0:1,1:2"),
        ("follower.replication.throttled.replicas", "*"),
    ],
)
def test_values_kafka_accepts_are_accepted(name: str, value: str) -> None:
    assert TopicConfigRegistry.default().validate({name: value}) == {name: value}


def test_a_config_kafka_does_not_know_is_still_refused() -> None:
    with pytest.raises(InvalidConfigError, match="unknown topic config"):
        TopicConfigRegistry.default().validate({"segment.millis": "5"})
