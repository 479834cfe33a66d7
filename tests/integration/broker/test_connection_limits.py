"""Connections that hold the broker's resources without using them are closed
or held back: an idle connection after connections_max_idle_ms, a frame that
was started but not finished after request_read_timeout_ms, and partial frames
across all connections never buffer more than max_buffered_request_bytes
(beyond one read chunk each) while other clients keep being served."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.integration.broker.conftest import BROKER_ENV, consume_range, quiet, unique
from tests.integration.broker.rawkafka import RawClient
from tests.support.platform import TidelakeProcess

API_VERSIONS = 18
FETCH = 1
MiB = 1024 * 1024


def _broker(tmp: pytest.TempPathFactory, name: str, **env: str) -> TidelakeProcess:
    return TidelakeProcess(Path(tmp.mktemp(name)) / "data", env={**BROKER_ENV, **env})


@pytest.fixture(scope="module")
def short_timeouts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidelakeProcess]:
    proc = _broker(
        tmp_path_factory,
        "timeouts",
        TIDELAKE_BROKER_CONNECTIONS_MAX_IDLE_MS="1000",
        TIDELAKE_BROKER_REQUEST_READ_TIMEOUT_MS="1000",
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(
    short_timeouts: TidelakeProcess,
) -> None:
    with RawClient(short_timeouts.bootstrap) as c:
        assert c.is_closed_by_peer(timeout=20)


def test_a_half_sent_frame_is_closed_after_the_request_read_timeout(
    short_timeouts: TidelakeProcess,
) -> None:
    with RawClient(short_timeouts.bootstrap) as c:
        c.send_raw(struct.pack(">i", 1000) + b"\0" * 10)
        assert c.is_closed_by_peer(timeout=20)


def test_a_half_sent_size_prefix_is_closed_after_the_request_read_timeout(
    short_timeouts: TidelakeProcess,
) -> None:
    with RawClient(short_timeouts.bootstrap) as c:
        c.send_raw(b"\0\0")
        assert c.is_closed_by_peer(timeout=20)


def test_a_connection_in_use_is_not_idle(short_timeouts: TidelakeProcess) -> None:
    with RawClient(short_timeouts.bootstrap) as c:
        deadline = time.monotonic() + 3  # three idle timeouts
        while time.monotonic() < deadline:
            assert c.request(API_VERSIONS, 0, {}).error_code == 0
            time.sleep(0.2)


def test_a_long_polling_fetch_is_not_idle(short_timeouts: TidelakeProcess) -> None:
    topic = unique("quiet")
    p = Producer(quiet({"bootstrap.servers": short_timeouts.bootstrap}))
    p.produce(topic, value=b"x")
    assert p.flush(20) == 0
    with RawClient(short_timeouts.bootstrap, timeout=30) as c:
        resp = c.request(
            FETCH,
            12,
            {
                "replica_id": -1,
                "max_wait": 3000,  # three idle timeouts, with nothing to read
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
            },
        )
        assert resp.responses[0].partitions[0].error_code == 0


# --- the cap on partial frames ---------------------------------------------------------


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidelakeProcess]:
    proc = _broker(
        tmp_path_factory,
        "capped",
        TIDELAKE_BROKER_MAX_BUFFERED_REQUEST_BYTES=str(64 * MiB),
        TIDELAKE_BROKER_REQUEST_READ_TIMEOUT_MS="120000",
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def _rss(proc: TidelakeProcess) -> int:
    assert proc.proc is not None
    for line in Path(f"/proc/{proc.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _hold_partial_frame(bootstrap: str, declared: int, sent: int, out: list[socket.socket]) -> None:
    """Declare a frame of ``declared`` bytes, send ``sent`` of them, keep the socket open."""
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    out.append(sock)
    sock.settimeout(10)
    body = memoryview(bytes(sent))
    try:
        sock.sendall(struct.pack(">i", declared) + bytes(body[:0]))
        sock.sendall(body)
    except (TimeoutError, OSError):
        pass  # held back by the broker: what the test wants


def test_partial_frames_of_many_clients_stay_under_the_cap_while_others_produce(
    capped: TidelakeProcess,
) -> None:
    topic = unique("alongside")
    warm = Producer(quiet({"bootstrap.servers": capped.bootstrap, "acks": "all"}))
    warm.produce(topic, value=b"warm")
    assert warm.flush(20) == 0
    before = _rss(capped)
    sockets: list[socket.socket] = []
    threads = [
        threading.Thread(
            target=_hold_partial_frame, args=(capped.bootstrap, 40 * MiB, 30 * MiB, sockets)
        )
        for _ in range(5)
    ]
    try:
        for t in threads:
            t.start()
        # A normal client keeps producing while the five hold their partial frames.
        p = Producer(quiet({"bootstrap.servers": capped.bootstrap, "acks": "all"}))
        failures: list[Any] = []
        for i in range(50):
            p.produce(
                topic,
                value=b"v%d" % i,
                on_delivery=lambda err, _m: failures.append(err) if err else None,
            )
        assert p.flush(30) == 0 and not failures
        for t in threads:
            t.join(30)
        grown = _rss(capped) - before
        # Without a cap: 5 x 30 MiB buffered. With it: one 40 MiB frame admitted
        # (30 MiB of it sent) and about a socket read for each of the others.
        assert grown < 100 * MiB, f"RSS grew by {grown / MiB:.0f} MiB"
        got = consume_range(capped.bootstrap, topic, [0], 51, timeout=30)
        assert [m.value() for m in got] == [b"warm"] + [b"v%d" % i for i in range(50)]
    finally:
        for s in sockets:
            s.close()
