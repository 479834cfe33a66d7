"""DescribeLogDirs with a real client (kafka-python's admin): the broker's one
logical directory, ``s3stream``, holds each partition it leads with its
retained bytes, which grow with what is produced; asking for some partitions
answers those only."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient

from tests.integration.broker.conftest import create_topic, quiet, unique
from tests.support.platform import TidelakeProcess


def _sizes(result: Any) -> dict[tuple[str, int], int]:
    """(topic, partition) -> size, from kafka-python's describe_log_dirs answer."""
    out: dict[tuple[str, int], int] = {}
    for broker in result if isinstance(result, list) else [result]:
        for log_dir in _field(broker, "results", "log_dirs"):
            assert _field(log_dir, "log_dir") == "s3stream"
            for topic in _field(log_dir, "topics"):
                name = _field(topic, "name", "topic")
                for p in _field(topic, "partitions"):
                    index = _field(p, "partition_index", "partition")
                    out[(name, index)] = _field(p, "partition_size", "size")
    return out


def _field(obj: Any, *names: str) -> Any:
    for n in names:
        if isinstance(obj, dict) and n in obj:
            return obj[n]
        if hasattr(obj, n):
            return getattr(obj, n)
    raise KeyError(f"none of {names} in {obj!r}")


def test_kafka_python_describes_the_size_of_each_partition(tidelake: TidelakeProcess) -> None:
    topic = unique("logdirs")
    create_topic(tidelake.bootstrap, topic, partitions=3)
    admin = KafkaAdminClient(bootstrap_servers=tidelake.bootstrap)
    try:
        empty = _sizes(admin.describe_log_dirs())
        assert {empty[(topic, p)] for p in range(3)} == {0}
        producer = Producer(quiet({"bootstrap.servers": tidelake.bootstrap}))
        for i in range(300):
            producer.produce(topic, value=b"v" * 100, partition=i % 2)  # partitions 0 and 1
        assert producer.flush(30) == 0
        full = _sizes(admin.describe_log_dirs())
        assert full[(topic, 0)] > 150 * 100 and full[(topic, 1)] > 150 * 100
        assert full[(topic, 2)] == 0
        some = _sizes(admin.describe_log_dirs({topic: [1]}))
        assert some == {(topic, 1): full[(topic, 1)]}
    finally:
        admin.close()
