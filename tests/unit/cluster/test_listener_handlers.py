"""Metadata, FindCoordinator and DescribeCluster answer with the endpoints of
the listener a request came in on; a broker without that listener is left
out, and what it leads or coordinates gets the error Kafka gives."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from ingest.broker import Broker
from ingest.cluster.view import BrokerEndpoint, ListenerEndpoint
from ingest.config import BrokerConfig
from ingest.handlers import describe_cluster, find_coordinator, metadata
from ingest.handlers.base import RequestContext
from ingest.metadata import MemoryMetadataStore
from ingest.protocol.codec import build, request_class
from ingest.protocol.errors import ErrorCode
from ingest.s3stream import MemoryStreamEngine
from ingest.security.listeners import Listener, SecurityProtocol
from ingest.security.sasl import SecuritySession

TOPIC = "orders"


def _broker(node: int, *, secure: bool = True) -> BrokerEndpoint:
    plain = ListenerEndpoint("PLAINTEXT", f"10.0.0.{node}", 9092, "PLAINTEXT")
    sasl = ListenerEndpoint("SASL_SSL", f"b{node}.example.com", 9094, "SASL_SSL")
    return BrokerEndpoint(node, plain.host, plain.port, None, (plain, sasl) if secure else (plain,))


class ThreeBrokers:
    """A cluster view: node 3 has no SASL_SSL listener; partition p is led by
    node p + 1; group "g<n>" is coordinated by node n."""

    node_id = 1
    clustered = True

    def brokers(self) -> Sequence[BrokerEndpoint]:
        return (_broker(1), _broker(2), _broker(3, secure=False))

    def controller_id(self) -> int:
        return 1

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        return partition + 1, 4

    def coordinator_for(self, group: str) -> BrokerEndpoint:
        return {b.node_id: b for b in self.brokers()}[int(group[1:])]


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    b = Broker(BrokerConfig(port=0), MemoryMetadataStore(), MemoryStreamEngine())
    await b.engine.start()
    await b.logs.load()
    await b.logs.create_topic(TOPIC, 3, 1, {})
    b.cluster = ThreeBrokers()
    try:
        yield b
    finally:
        await b.engine.close()


def _ctx(broker: Broker, listener: str, api_key: int, version: int) -> RequestContext:
    session = SecuritySession(
        Listener(listener, SecurityProtocol(listener), "127.0.0.1", 0), close_delay_s=0
    )
    return RequestContext(broker, api_key, version, 1, "test", "127.0.0.1", session)


def _request(api_key: int, version: int, values: dict[str, Any]) -> Any:
    return build(request_class(api_key, version), values)


async def _metadata(broker: Broker, listener: str, version: int) -> Any:
    request = _request(
        3, version, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False}
    )
    return await metadata.handle(_ctx(broker, listener, 3, version), request)


async def test_metadata_names_brokers_at_the_requests_listener(broker: Broker) -> None:
    got = await _metadata(broker, "SASL_SSL", 12)
    assert [(b.node_id, b.host, b.port) for b in got.brokers] == [
        (1, "b1.example.com", 9094),
        (2, "b2.example.com", 9094),
    ]
    plain = await _metadata(broker, "PLAINTEXT", 12)
    assert [(b.node_id, b.host) for b in plain.brokers] == [
        (1, "10.0.0.1"),
        (2, "10.0.0.2"),
        (3, "10.0.0.3"),
    ]
    assert [p.error_code for p in plain.topics[0].partitions] == [ErrorCode.none] * 3


async def test_a_partition_led_by_a_broker_without_the_listener_has_no_leader_there(
    broker: Broker,
) -> None:
    for version, code in ((12, ErrorCode.listener_not_found), (5, ErrorCode.leader_not_available)):
        got = await _metadata(broker, "SASL_SSL", version)
        parts = {int(p.partition_index): p for p in got.topics[0].partitions}
        assert [parts[i].error_code for i in range(3)] == [ErrorCode.none, ErrorCode.none, code]
        assert (parts[1].leader_id, parts[2].leader_id) == (2, -1)


async def test_find_coordinator_names_the_coordinator_at_the_requests_listener(
    broker: Broker,
) -> None:
    ctx = _ctx(broker, "SASL_SSL", 10, 4)
    request = _request(10, 4, {"key_type": 0, "coordinator_keys": ["g2", "g3"]})
    got = await find_coordinator.handle(ctx, request)
    by_key = {c.key: c for c in got.coordinators}
    assert (by_key["g2"].error_code, by_key["g2"].host, by_key["g2"].port) == (
        ErrorCode.none,
        "b2.example.com",
        9094,
    )
    # Kafka: a coordinator without the request's listener is not available to it
    assert by_key["g3"].error_code == ErrorCode.coordinator_not_available
    assert by_key["g3"].node_id == -1
    plain = await find_coordinator.handle(_ctx(broker, "PLAINTEXT", 10, 4), request)
    assert [(c.node_id, c.host) for c in plain.coordinators] == [(2, "10.0.0.2"), (3, "10.0.0.3")]


async def test_describe_cluster_lists_the_brokers_with_the_requests_listener(
    broker: Broker,
) -> None:
    request = _request(60, 1, {"include_cluster_authorized_operations": False})
    got = await describe_cluster.handle(_ctx(broker, "SASL_SSL", 60, 1), request)
    assert [(b.broker_id, b.host, b.port) for b in got.brokers] == [
        (1, "b1.example.com", 9094),
        (2, "b2.example.com", 9094),
    ]
