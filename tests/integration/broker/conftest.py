"""Shared helpers for the broker tests with real Kafka clients.

Each module gets one broker (``tidelake``), started with a short minimum
session timeout so that consumer groups settle quickly.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.platform import TidelakeProcess

BROKER_ENV = {
    "TIDELAKE_BROKER_GROUP_MIN_SESSION_TIMEOUT_MS": "1000",
    "TIDELAKE_BROKER_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
}

_quiet = logging.getLogger("tidelake-tests.librdkafka")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False

_counter = itertools.count()

# Explicit record timestamps: an hour ago, well inside the default retention.ms
# (7 days), so that no retention pass removes records while a test reads them.
RECENT_TS = (int(time.time()) - 3600) * 1000


def quiet(conf: dict[str, Any]) -> dict[str, Any]:
    """A librdkafka config that keeps its logs out of the test output."""
    return {"log_level": 0, "logger": _quiet, **conf}


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_counter)}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def tidelake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidelakeProcess]:
    """One broker per module, with a 1 s minimum group session timeout."""
    proc = TidelakeProcess(Path(tmp_path_factory.mktemp("broker")) / "data", env=BROKER_ENV)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def admin(bootstrap: str) -> AdminClient:
    return AdminClient(quiet({"bootstrap.servers": bootstrap}))


def wait_all(futures: dict[Any, Future[Any]], timeout: float = 30) -> dict[Any, Any]:
    """Resolve every future of an AdminClient call; exceptions are returned, not raised."""
    out: dict[Any, Any] = {}
    for key, fut in futures.items():
        try:
            out[key] = fut.result(timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - the caller asserts on it
            out[key] = exc
    return out


def create_topic(bootstrap: str, name: str, partitions: int = 1, **config: str) -> None:
    client = admin(bootstrap)
    res = wait_all(
        client.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)]
        )
    )
    assert res[name] is None, res[name]


def consume_range(
    bootstrap: str,
    topic: str,
    partitions: Iterable[int],
    count: int,
    timeout: float = 30,
    start: int | None = None,
    **conf: Any,
) -> list[Message]:
    """Read ``count`` messages from the given partitions with manual assignment."""
    c = Consumer(
        quiet(
            {
                "bootstrap.servers": bootstrap,
                "group.id": unique("reader"),
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                **conf,
            }
        )
    )
    try:
        offset = start if start is not None else -2  # OFFSET_BEGINNING
        c.assign([TopicPartition(topic, p, offset) for p in partitions])
        out: list[Message] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"consume error: {m.error()}")
            out.append(m)
        return out
    finally:
        c.close()
