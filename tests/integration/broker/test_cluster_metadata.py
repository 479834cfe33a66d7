"""What Metadata and DescribeCluster tell clients about the broker: the
advertised address and, when asked, the operations the caller may perform."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation

from tests.integration.broker.conftest import BROKER_ENV, admin, create_topic, unique
from tests.integration.broker.rawkafka import RawClient
from tests.support.net import free_port
from tests.support.platform import TidelakeProcess

METADATA = 3
FIND_COORDINATOR = 10
DESCRIBE_CLUSTER = 60
NOT_INCLUDED = -2147483648

TOPIC_OPERATIONS = {
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
CLUSTER_OPERATIONS = {
    AclOperation.CREATE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
}


# --- advertised address ------------------------------------------------------------


@pytest.fixture(scope="module")
def advertised(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TidelakeProcess, int]]:
    """A broker that advertises another host name and port than it listens on."""
    port = free_port()
    env = dict(
        BROKER_ENV,
        TIDELAKE_BROKER_ADVERTISED_HOST="kafka.example.internal",
        TIDELAKE_BROKER_ADVERTISED_PORT=str(port),
    )
    proc = TidelakeProcess(Path(tmp_path_factory.mktemp("advertised")) / "data", env=env)
    proc.start()
    try:
        yield proc, port
    finally:
        proc.stop()


@pytest.mark.parametrize("version", [0, 9, 12])
def test_metadata_names_the_advertised_host_and_port(
    advertised: tuple[TidelakeProcess, int], version: int
) -> None:
    proc, port = advertised
    with RawClient(proc.bootstrap) as c:
        resp = c.request(METADATA, version, {"topics": []})
    [broker] = resp.brokers
    assert (broker.host, broker.port) == ("kafka.example.internal", port)


@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster_names_the_advertised_host_and_port(
    advertised: tuple[TidelakeProcess, int], version: int
) -> None:
    proc, port = advertised
    with RawClient(proc.bootstrap) as c:
        resp = c.request(
            DESCRIBE_CLUSTER, version, {"include_cluster_authorized_operations": False}
        )
    [broker] = resp.brokers
    assert (broker.host, broker.port) == ("kafka.example.internal", port)


def test_find_coordinator_names_the_advertised_host_and_port(
    advertised: tuple[TidelakeProcess, int],
) -> None:
    proc, port = advertised
    with RawClient(proc.bootstrap) as c:
        resp = c.request(FIND_COORDINATOR, 2, {"key": "some-group", "key_type": 0})
    assert (resp.host, resp.port) == ("kafka.example.internal", port)


# --- authorized operations -----------------------------------------------------------


def test_describe_topics_lists_every_topic_operation_when_asked(tidelake: TidelakeProcess) -> None:
    topic = unique("ops")
    create_topic(tidelake.bootstrap, topic)
    client = admin(tidelake.bootstrap)
    futures = client.describe_topics(
        TopicCollection([topic]), include_authorized_operations=True, request_timeout=10
    )
    desc = futures[topic].result(timeout=20)
    assert set(desc.authorized_operations) == TOPIC_OPERATIONS


def test_describe_cluster_lists_every_cluster_operation_when_asked(
    tidelake: TidelakeProcess,
) -> None:
    client = admin(tidelake.bootstrap)
    desc = client.describe_cluster(include_authorized_operations=True).result(timeout=20)
    assert set(desc.authorized_operations) == CLUSTER_OPERATIONS


def test_metadata_v10_returns_operations_only_when_asked(tidelake: TidelakeProcess) -> None:
    topic = unique("ops-raw")
    create_topic(tidelake.bootstrap, topic)
    request = {
        "topics": [{"name": topic}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": True,
        "include_topic_authorized_operations": True,
    }
    with RawClient(tidelake.bootstrap) as c:
        asked = c.request(METADATA, 10, request)
        not_asked = c.request(
            METADATA,
            10,
            dict(
                request,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            ),
        )
    # bit n stands for AclOperation code n (READ=3 ... ALTER_CONFIGS=11, IDEMPOTENT_WRITE=12)
    assert asked.topics[0].topic_authorized_operations == sum(
        1 << op.value for op in TOPIC_OPERATIONS
    )
    assert asked.cluster_authorized_operations == sum(1 << op.value for op in CLUSTER_OPERATIONS)
    assert not_asked.topics[0].topic_authorized_operations == NOT_INCLUDED
    assert not_asked.cluster_authorized_operations == NOT_INCLUDED


def test_describe_cluster_returns_operations_only_when_asked(tidelake: TidelakeProcess) -> None:
    with RawClient(tidelake.bootstrap) as c:
        asked = c.request(DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": True})
        not_asked = c.request(DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
    assert asked.cluster_authorized_operations == sum(1 << op.value for op in CLUSTER_OPERATIONS)
    assert not_asked.cluster_authorized_operations == NOT_INCLUDED
