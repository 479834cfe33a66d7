"""SIGTERM shuts the broker down gracefully: it stops taking requests, answers
those in flight (a waiting Fetch at once, with what it has), then closes; what
it acknowledged is there after a restart."""

from __future__ import annotations

import signal
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.serial import entity_reader

from ingest.protocol.codec import is_flexible, response_class
from ingest.protocol.records import build_batch
from tests.integration.broker.conftest import (
    BROKER_ENV,
    RECENT_TS,
    consume_range,
    create_topic,
    quiet,
    unique,
)
from tests.integration.broker.rawkafka import RawClient
from tests.support.platform import TidelakeProcess

PRODUCE = 0
FETCH = 1


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[TidelakeProcess]:
    proc = TidelakeProcess(tmp_path / "data", env=BROKER_ENV)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def _read(api_key: int, version: int, frame: bytes) -> Any:
    offset = 5 if is_flexible(api_key, version) else 4  # correlation id (+ tagged fields)
    result = entity_reader(response_class(api_key, version))(memoryview(frame), offset)
    return result[0] if isinstance(result, tuple) else result


def _sigterm(proc: TidelakeProcess) -> None:
    assert proc.proc is not None
    proc.proc.send_signal(signal.SIGTERM)


def test_a_waiting_fetch_is_answered_when_the_broker_stops(broker: TidelakeProcess) -> None:
    topic = unique("tail")
    p = Producer(quiet({"bootstrap.servers": broker.bootstrap, "acks": "all"}))
    p.produce(topic, value=b"only")
    assert p.flush(20) == 0
    with RawClient(broker.bootstrap, timeout=60) as c:
        fetch = {
            "replica_id": -1,
            "max_wait": 30_000,  # longer than the drain timeout
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {"partition": 0, "fetch_offset": 1, "partition_max_bytes": 1 << 20}
                    ],
                }
            ],
            "forgotten_topics_data": [],
        }
        c.send_frame(c.encode(FETCH, 12, fetch))
        time.sleep(0.5)  # let the broker read it and start waiting
        _sigterm(broker)
        resp = _read(FETCH, 12, c.recv_frame())
        [part] = resp.responses[0].partitions
        assert (part.error_code, part.high_watermark, part.records) == (0, 1, b"")
        assert c.is_closed_by_peer(timeout=30)
    assert broker.stop() == 0


def _produce_frame(c: RawClient, topic: str, i: int) -> bytes:
    batch = build_batch([(b"k%d" % i, b"%06d" % i + b"x" * 256 * 1024, [], RECENT_TS)])
    return c.encode(
        PRODUCE,
        3,
        {
            "transactional_id": None,
            "acks": -1,
            "timeout": 30_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        },
    )


def test_produces_in_flight_at_sigterm_are_answered_and_kept(
    broker: TidelakeProcess, tmp_path: Path
) -> None:
    topic = unique("inflight")
    create_topic(broker.bootstrap, topic)
    requests = 400
    with RawClient(broker.bootstrap, timeout=60) as c:
        frames = [_produce_frame(c, topic, i) for i in range(requests)]
        data = b"".join(struct.pack(">i", len(f)) + f for f in frames)

        def send() -> None:
            try:
                c.sock.sendall(data)
            except OSError:
                pass  # the broker stopped reading and closed: expected

        sender = threading.Thread(target=send)
        sender.start()
        acked = 0
        first = c.recv_frame()  # the broker is busy with the pipeline now
        _sigterm(broker)
        frames_in = [first]
        while True:
            try:
                frames_in.append(c.recv_frame())
            except ConnectionError as exc:
                assert "closed by the broker" in str(exc), exc  # EOF, not a reset
                break
        sender.join(30)
        for corr, frame in enumerate(frames_in, start=1):
            assert struct.unpack_from(">i", frame)[0] == corr
            resp = _read(PRODUCE, 3, frame)
            [t] = resp.responses
            [pr] = t.partition_responses
            assert pr.error_code == 0
            acked += 1
    assert broker.stop() == 0
    assert acked >= 1
    restarted = TidelakeProcess(broker.data_dir, env=BROKER_ENV).start()
    try:
        got = consume_range(restarted.bootstrap, topic, [0], acked, timeout=60)
        assert [m.value()[:6] for m in got[:acked]] == [b"%06d" % i for i in range(acked)]
    finally:
        restarted.stop()
