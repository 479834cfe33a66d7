"""Client quotas with real clients: AlterClientQuotas / DescribeClientQuotas
(no Python admin client speaks them yet: raw requests), and a confluent-kafka
producer held to its client id's producer_byte_rate by throttle_time."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import pytest

from tests.integration.broker.rawkafka import RawClient
from tests.support.platform import TidelakeProcess

_RATE = 400_000  # bytes/s
_SIZE = 1024


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidelakeProcess]:
    data = tmp_path_factory.mktemp("quota") / "data"
    env = {
        # 11 windows of 100 ms: a rate spans at least 1 s (Kafka's 11 x 1 s is slower to test)
        "TIDELAKE_BROKER_QUOTA_WINDOW_SIZE_MS": "100",
        "TIDELAKE_BROKER_ACL_REFRESH_INTERVAL_MS": "200",
    }
    proc = TidelakeProcess(Path(data), env=env)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def _alter(b: TidelakeProcess, client_id: str, ops: list[dict[str, Any]]) -> Any:
    with RawClient(b.bootstrap) as raw:
        return raw.request(
            49,
            1,
            {
                "entries": [
                    {"entity": [{"entity_type": "client-id", "entity_name": client_id}], "ops": ops}
                ],
                "validate_only": False,
            },
        )


def _produce_seconds(b: TidelakeProcess, client_id: str, total: int) -> tuple[float, int]:
    """Seconds to produce ``total`` bytes, and the largest throttle (ms) librdkafka saw."""
    throttles: list[int] = []

    def on_stats(raw: str) -> None:
        for broker in json.loads(raw)["brokers"].values():
            throttles.append(int(broker.get("throttle", {}).get("max", 0)))

    producer = ck.Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "client.id": client_id,
            "acks": 1,
            "linger.ms": 5,
            "batch.size": 16384,
            "statistics.interval.ms": 200,
            "stats_cb": on_stats,
        }
    )
    payload = b"x" * _SIZE
    producer.list_topics("quota-topic", timeout=10)
    start = time.monotonic()
    for _ in range(total // _SIZE):
        while True:
            try:
                producer.produce("quota-topic", payload)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    assert producer.flush(60) == 0
    elapsed = time.monotonic() - start
    producer.poll(0.5)  # a last statistics report
    return elapsed, max(throttles, default=0)


def test_a_producer_is_held_to_its_client_ids_byte_rate(quota_broker: TidelakeProcess) -> None:
    ops = [{"key": "producer_byte_rate", "value": float(_RATE), "remove": False}]
    altered = _alter(quota_broker, "slow-app", ops)
    assert [e.error_code for e in altered.entries] == [0]
    total = 4 * _RATE
    fast, _ = _produce_seconds(quota_broker, "fast-app", total)
    slow, throttle_ms = _produce_seconds(quota_broker, "slow-app", total)
    # 4 s worth at the quota; the first second's worth passes as a burst
    assert slow >= 2.0, (slow, fast, throttle_ms)
    assert fast < slow / 2, (slow, fast)
    assert throttle_ms > 0  # the broker told the client to wait (throttle_time)


def test_quotas_are_described_and_removed(quota_broker: TidelakeProcess) -> None:
    ops = [{"key": "consumer_byte_rate", "value": 1_000_000.0, "remove": False}]
    assert [e.error_code for e in _alter(quota_broker, "described", ops).entries] == [0]
    with RawClient(quota_broker.bootstrap) as raw:
        described = raw.request(
            48,
            1,
            {
                "components": [{"entity_type": "client-id", "match_type": 0, "match": "described"}],
                "strict": True,
            },
        )
    assert described.error_code == 0
    assert [
        ([(e.entity_type, e.entity_name) for e in x.entity], [(v.key, v.value) for v in x.values])
        for x in described.entries
    ] == [([("client-id", "described")], [("consumer_byte_rate", 1_000_000.0)])]
    removed = _alter(
        quota_broker, "described", [{"key": "consumer_byte_rate", "value": 0.0, "remove": True}]
    )
    assert [e.error_code for e in removed.entries] == [0]
    with RawClient(quota_broker.bootstrap) as raw:
        again = raw.request(
            48,
            1,
            {
                "components": [{"entity_type": "client-id", "match_type": 0, "match": "described"}],
                "strict": True,
            },
        )
    assert again.entries == ()


def test_unsupported_quota_keys_are_invalid_requests(quota_broker: TidelakeProcess) -> None:
    ops = [{"key": "request_percentage", "value": 50.0, "remove": False}]
    altered = _alter(quota_broker, "odd", ops)
    assert [e.error_code for e in altered.entries] == [42]  # INVALID_REQUEST
