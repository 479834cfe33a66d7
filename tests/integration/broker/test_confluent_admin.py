"""confluent-kafka AdminClient against the broker: topics, configs, partitions,
records and the cluster."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from tests.integration.broker.conftest import (
    BROKER_ENV,
    admin,
    consume_range,
    create_topic,
    quiet,
    unique,
    wait_all,
)
from tests.support.platform import TidelakeProcess


def _code(result: Any) -> int | None:
    """The Kafka error code of an admin future's outcome (None: success)."""
    if isinstance(result, KafkaException):
        return result.args[0].code()
    assert not isinstance(result, Exception), result
    return None


def _produce(bootstrap: str, topic: str, partition: int, n: int) -> None:
    p = Producer(quiet({"bootstrap.servers": bootstrap}))
    for i in range(n):
        p.produce(topic, value=f"r{i}".encode(), partition=partition)
    assert p.flush(30) == 0


def test_create_topics_creates_and_reports_existing(tidelake: TidelakeProcess) -> None:
    client = admin(tidelake.bootstrap)
    name = unique("created")
    res = wait_all(client.create_topics([NewTopic(name, num_partitions=3, replication_factor=1)]))
    assert res == {name: None}
    md = client.list_topics(timeout=10)
    assert name in md.topics
    assert sorted(md.topics[name].partitions) == [0, 1, 2]
    again = wait_all(client.create_topics([NewTopic(name, num_partitions=1)]))
    assert _code(again[name]) == KafkaError.TOPIC_ALREADY_EXISTS


def test_create_topics_validate_only_creates_nothing(tidelake: TidelakeProcess) -> None:
    client = admin(tidelake.bootstrap)
    name = unique("validated")
    res = wait_all(client.create_topics([NewTopic(name, num_partitions=2)], validate_only=True))
    assert res == {name: None}
    assert name not in client.list_topics(timeout=10).topics
    bad = wait_all(client.create_topics([NewTopic("bad name!", 1)], validate_only=True))
    assert _code(bad["bad name!"]) == KafkaError.TOPIC_EXCEPTION


@pytest.mark.parametrize("name", ["bad name!", "..", "x" * 250, "slash/topic", "ünïcode"])
def test_create_topics_rejects_invalid_names(tidelake: TidelakeProcess, name: str) -> None:
    client = admin(tidelake.bootstrap)
    res = wait_all(client.create_topics([NewTopic(name, num_partitions=1)]))
    assert _code(res[name]) == KafkaError.TOPIC_EXCEPTION
    assert name not in client.list_topics(timeout=10).topics


def test_create_topics_rejects_zero_partitions_and_bad_configs(tidelake: TidelakeProcess) -> None:
    client = admin(tidelake.bootstrap)
    zero, bad_cfg, unknown_cfg = unique("zero"), unique("badcfg"), unique("unknowncfg")
    res = wait_all(
        client.create_topics(
            [
                NewTopic(zero, num_partitions=0, replication_factor=1),
                NewTopic(bad_cfg, 1, 1, config={"retention.ms": "soon"}),
                NewTopic(unknown_cfg, 1, 1, config={"no.such.config": "1"}),
            ]
        )
    )
    assert _code(res[zero]) == KafkaError.INVALID_PARTITIONS
    assert _code(res[bad_cfg]) == KafkaError.INVALID_CONFIG
    assert _code(res[unknown_cfg]) == KafkaError.INVALID_CONFIG
    topics = client.list_topics(timeout=10).topics
    assert not {zero, bad_cfg, unknown_cfg} & set(topics)


def _topic_configs(client: Any, name: str) -> dict[str, Any]:
    res = ConfigResource(ResourceType.TOPIC, name)
    [(_, fut)] = client.describe_configs([res]).items()
    return fut.result(timeout=10)


def test_describe_configs_reports_overrides_and_defaults(tidelake: TidelakeProcess) -> None:
    client = admin(tidelake.bootstrap)
    name = unique("described")
    create_topic(tidelake.bootstrap, name, **{"retention.ms": "3600000"})
    configs = _topic_configs(client, name)
    assert configs["retention.ms"].value == "3600000"
    assert not configs["retention.ms"].is_default
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].is_default
    assert configs["max.message.bytes"].value == "1048588"

    [(_, fut)] = client.describe_configs([ConfigResource(ResourceType.TOPIC, "nope")]).items()
    with pytest.raises(KafkaException) as err:
        fut.result(timeout=10)
    assert err.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_configs_replaces_the_overrides(tidelake: TidelakeProcess) -> None:
    client = admin(tidelake.bootstrap)
    name = unique("altered")
    create_topic(tidelake.bootstrap, name, **{"retention.ms": "3600000"})
    res = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.bytes": "123456"})
    assert wait_all(client.alter_configs([res])) == {res: None}
    configs = _topic_configs(client, name)
    assert configs["retention.bytes"].value == "123456"
    # AlterConfigs is a full replacement: the earlier override is gone.
    assert configs["retention.ms"].is_default
    bad = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.bytes": "lots"})
    assert _code(wait_all(client.alter_configs([bad]))[bad]) == KafkaError.INVALID_CONFIG
    assert _topic_configs(client, name)["retention.bytes"].value == "123456"


def test_incremental_alter_configs_sets_and_deletes_single_keys(
    tidelake: TidelakeProcess,
) -> None:
    client = admin(tidelake.bootstrap)
    name = unique("incremental")
    create_topic(tidelake.bootstrap, name, **{"retention.ms": "3600000"})
    res = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("max.message.bytes", "2000000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    assert wait_all(client.incremental_alter_configs([res])) == {res: None}
    configs = _topic_configs(client, name)
    assert configs["max.message.bytes"].value == "2000000"
    assert configs["retention.ms"].value == "3600000"  # kept
    res = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    assert wait_all(client.incremental_alter_configs([res])) == {res: None}
    configs = _topic_configs(client, name)
    assert configs["retention.ms"].is_default
    assert configs["max.message.bytes"].value == "2000000"


def test_create_partitions_grows_a_topic_and_rejects_shrinking(tidelake: TidelakeProcess) -> None:
    client = admin(tidelake.bootstrap)
    name = unique("grown")
    create_topic(tidelake.bootstrap, name, partitions=1)
    assert wait_all(client.create_partitions([NewPartitions(name, 4)])) == {name: None}
    assert sorted(client.list_topics(name, timeout=10).topics[name].partitions) == [0, 1, 2, 3]
    _produce(tidelake.bootstrap, name, 3, 2)
    assert [m.value() for m in consume_range(tidelake.bootstrap, name, [3], 2)] == [b"r0", b"r1"]
    res = wait_all(client.create_partitions([NewPartitions(name, 2)]))
    assert _code(res[name]) == KafkaError.INVALID_PARTITIONS
    res = wait_all(client.create_partitions([NewPartitions(unique("missing"), 2)]))
    assert [_code(v) for v in res.values()] == [KafkaError.UNKNOWN_TOPIC_OR_PART]


def test_delete_topics_removes_the_topic(tidelake: TidelakeProcess) -> None:
    client = admin(tidelake.bootstrap)
    name = unique("deleted")
    create_topic(tidelake.bootstrap, name, partitions=2)
    _produce(tidelake.bootstrap, name, 0, 3)
    assert wait_all(client.delete_topics([name])) == {name: None}
    assert name not in client.list_topics(timeout=10).topics
    res = wait_all(client.delete_topics([name]))
    assert _code(res[name]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    # The name can be used again, and the new topic starts empty.
    create_topic(tidelake.bootstrap, name, partitions=1)
    _produce(tidelake.bootstrap, name, 0, 1)
    [m] = consume_range(tidelake.bootstrap, name, [0], 1)
    assert (m.offset(), m.value()) == (0, b"r0")


def test_list_topics_and_describe_cluster_name_this_broker(tidelake: TidelakeProcess) -> None:
    client = admin(tidelake.bootstrap)
    name = unique("listed")
    create_topic(tidelake.bootstrap, name, partitions=2)
    md = client.list_topics(timeout=10)
    assert len(md.brokers) == 1
    [b] = md.brokers.values()
    assert (b.host, b.port) == ("127.0.0.1", tidelake.kafka_port)
    t = md.topics[name]
    assert t.error is None
    assert all(p.leader == b.id and p.replicas == [b.id] for p in t.partitions.values())
    cluster = client.describe_cluster().result(timeout=10)
    assert cluster.cluster_id == md.cluster_id and cluster.cluster_id
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(b.id, b.host, b.port)]
    assert cluster.controller.id == b.id


def test_delete_records_moves_the_low_watermark(tidelake: TidelakeProcess) -> None:
    client = admin(tidelake.bootstrap)
    name = unique("trimmed")
    create_topic(tidelake.bootstrap, name, partitions=1)
    _produce(tidelake.bootstrap, name, 0, 10)
    tp = TopicPartition(name, 0, 4)
    res = wait_all(client.delete_records([tp]))
    [(_, deleted)] = res.items()
    assert deleted.low_watermark == 4
    got = consume_range(tidelake.bootstrap, name, [0], 6)
    assert [(m.offset(), m.value()) for m in got] == [(i, f"r{i}".encode()) for i in range(4, 10)]
    # Beyond the high watermark: OFFSET_OUT_OF_RANGE, and nothing moves.
    res = wait_all(client.delete_records([TopicPartition(name, 0, 11)]))
    [(_, err)] = res.items()
    assert _code(err) == KafkaError.OFFSET_OUT_OF_RANGE
    # -1 (OFFSET_END) deletes everything up to the high watermark.
    res = wait_all(client.delete_records([TopicPartition(name, 0, -1)]))
    [(_, deleted)] = res.items()
    assert deleted.low_watermark == 10
    c = Consumer(quiet({"bootstrap.servers": tidelake.bootstrap, "group.id": unique("wm")}))
    try:
        assert c.get_watermark_offsets(TopicPartition(name, 0), timeout=10) == (10, 10)
    finally:
        c.close()


def test_retention_trims_by_time_and_by_size(tmp_path: Path) -> None:
    # Its own broker, checking retention every 0.3 s (the others keep the
    # default: their records carry old timestamps on purpose).
    env = {**BROKER_ENV, "TIDELAKE_BROKER_RETENTION_CHECK_INTERVAL_MS": "300"}
    with TidelakeProcess(tmp_path / "data", env=env) as broker:
        _check_retention(broker)


def _check_retention(tidelake: TidelakeProcess) -> None:
    by_time, by_size = unique("retention-ms"), unique("retention-bytes")
    create_topic(tidelake.bootstrap, by_time)
    create_topic(tidelake.bootstrap, by_size, **{"retention.bytes": "1000"})
    p = Producer(quiet({"bootstrap.servers": tidelake.bootstrap}))
    for _ in range(30):
        p.produce(by_time, value=b"t" * 100, partition=0)
        p.produce(by_size, value=b"s" * 100, partition=0)
        p.flush(10)  # one batch per record
    c = Consumer(quiet({"bootstrap.servers": tidelake.bootstrap, "group.id": unique("wm")}))
    try:
        time.sleep(1)
        assert c.get_watermark_offsets(TopicPartition(by_time, 0), timeout=10) == (0, 30)
        low, high = c.get_watermark_offsets(TopicPartition(by_size, 0), timeout=10)
        assert high == 30 and 20 <= low < 30  # about 1000 bytes of ~170-byte batches kept
        # Records older than retention.ms go once it is lowered.
        res = ConfigResource(
            ResourceType.TOPIC,
            by_time,
            incremental_configs=[
                ConfigEntry("retention.ms", "500", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        assert wait_all(admin(tidelake.bootstrap).incremental_alter_configs([res])) == {res: None}
        deadline = time.monotonic() + 10
        while c.get_watermark_offsets(TopicPartition(by_time, 0), timeout=10)[0] < 30:
            assert time.monotonic() < deadline, "retention.ms did not trim"
            time.sleep(0.2)
    finally:
        c.close()
    # Consuming from the beginning starts at the new log start.
    p.produce(by_time, value=b"after", partition=0)
    p.flush(10)
    [m] = consume_range(tidelake.bootstrap, by_time, [0], 1)
    assert (m.offset(), m.value()) == (30, b"after")
