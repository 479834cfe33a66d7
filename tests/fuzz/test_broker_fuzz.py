"""A running broker (``tidelake serve``) under a few hundred mutated frames over
sockets: afterwards it is alive, logged no traceback, and a confluent-kafka
client still produces and consumes."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.conftest import fuzz_settings
from tests.fuzz.frames import TOPICS, random_frame, request_frame, served_versions, uvarint
from tests.integration.broker.conftest import consume_range, create_topic, quiet, unique
from tests.integration.broker.rawkafka import RawClient
from tests.support.platform import TidelakeProcess

VERSIONS = served_versions()
# Fetch waits at most 200 ms; groups settle at once; sessions end within 2 s.
BROKER_ENV = {
    "TIDELAKE_BROKER_FETCH_MAX_WAIT_CAP_MS": "200",
    "TIDELAKE_BROKER_GROUP_MIN_SESSION_TIMEOUT_MS": "10",
    "TIDELAKE_BROKER_GROUP_MAX_SESSION_TIMEOUT_MS": "2000",
    "TIDELAKE_BROKER_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TidelakeProcess]:
    proc = TidelakeProcess(Path(tmp_path_factory.mktemp("fuzz-broker")) / "data", env=BROKER_ENV)
    proc.start()
    try:
        for name in TOPICS:
            create_topic(proc.bootstrap, name, partitions=2)
        yield proc
    finally:
        proc.stop()


class _Sender:
    """Sends frames, reconnecting whenever the broker closed the connection."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.addr = (host, int(port))
        self.sock: socket.socket | None = None
        self.outcomes = {"answered": 0, "closed": 0, "silent": 0}

    def send(self, frame: bytes) -> None:
        if self.sock is None:
            self.sock = socket.create_connection(self.addr, timeout=5)
        try:
            self.sock.sendall(struct.pack(">i", len(frame)) + frame)
            self.sock.settimeout(0.5)
            data = self.sock.recv(65536)
        except TimeoutError:  # no answer yet (acks=0, a waiting join): move on
            self.outcomes["silent"] += 1
            self._drop()
            return
        except OSError:
            data = b""
        if data:
            self.outcomes["answered"] += 1
            # Responses are not read to the end: start afresh for the next frame.
        else:
            self.outcomes["closed"] += 1
        self._drop()

    def _drop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def _no_traceback(broker: TidelakeProcess) -> None:
    assert broker.proc is not None and broker.proc.poll() is None, broker.log_tail()
    log = broker.log_path.read_text(errors="replace")
    assert "Traceback" not in log, _first_traceback(log)


# ListOffsets v8, OffsetCommit v8, OffsetFetch v8: a null compact array where
# Kafka's schema has no null (the body after the request header).
_NULL_ARRAY_BODIES = {
    "list-offsets-v8-topics": (2, 8, struct.pack(">ib", -1, 0) + b"\0" + b"\0"),
    "offset-commit-v8-topics": (
        8,
        8,
        b"\x02g" + struct.pack(">i", -1) + b"\x01" + b"\0" + b"\0" + b"\0",
    ),
    "offset-fetch-v8-groups": (9, 8, b"\0" + b"\0" + b"\0"),
    "offset-fetch-v8-partition-indexes": (
        9,
        8,
        b"\x02" + b"\x02g" + b"\x02" + b"\x02t" + b"\0" + b"\0" + b"\0" + b"\0" + b"\0",
    ),
}


@pytest.mark.parametrize("case", sorted(_NULL_ARRAY_BODIES))
def test_null_array_kafka_forbids_closes_the_connection_without_a_traceback(
    broker: TidelakeProcess, case: str
) -> None:
    api_key, version, body = _NULL_ARRAY_BODIES[case]
    with RawClient(broker.bootstrap) as c:
        c.send_frame(c.header(api_key, version) + body)
        assert c.is_closed_by_peer(timeout=10)
    _no_traceback(broker)


def test_offset_fetch_with_null_topics_returns_every_committed_offset(
    broker: TidelakeProcess,
) -> None:
    group = unique("all-offsets")
    with RawClient(broker.bootstrap) as c:
        commit = c.request(
            8,
            8,
            {
                "group_id": group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "topics": [
                    {
                        "name": TOPICS[0],
                        "partitions": [
                            {"partition_index": 0, "committed_offset": 2},
                            {"partition_index": 1, "committed_offset": 1},
                        ],
                    },
                    {
                        "name": TOPICS[1],
                        "partitions": [{"partition_index": 1, "committed_offset": 3}],
                    },
                ],
            },
        )
        assert all(p.error_code == 0 for t in commit.topics for p in t.partitions), commit
        for version, body in ((7, {"group_id": group, "topics": None}), (8, None)):
            if body is None:
                body = {"groups": [{"group_id": group, "topics": None}]}
            resp = c.request(9, version, body)
            topics = resp.topics if version < 8 else resp.groups[0].topics
            got = {
                (t.name, p.partition_index): p.committed_offset
                for t in topics
                for p in t.partitions
            }
            assert got == {(TOPICS[0], 0): 2, (TOPICS[0], 1): 1, (TOPICS[1], 1): 3}, resp
    _no_traceback(broker)


def test_huge_declared_array_closes_the_connection_and_the_broker_lives(
    broker: TidelakeProcess,
) -> None:
    # Before the codec's shape check, kio reserved 32 GiB for this and aborted the process.
    body = struct.pack(">ib", -1, 0) + uvarint(2**32 - 1) + b"\0"
    with RawClient(broker.bootstrap) as c:
        c.send_frame(c.header(2, 8) + body)
        assert c.is_closed_by_peer(timeout=10)
    _no_traceback(broker)


def test_broker_survives_mutated_frames_and_still_serves_clients(broker: TidelakeProcess) -> None:
    sender = _Sender(broker.bootstrap)

    @fuzz_settings(300)
    @given(st.data())
    def send_one(data: st.DataObject) -> None:
        api_key, version = data.draw(st.sampled_from(VERSIONS))
        if data.draw(st.integers(0, 9)) == 0:
            frame = data.draw(random_frame(api_key, version))
        else:
            frame = data.draw(request_frame(api_key, version))
        sender.send(frame)
        assert broker.proc is not None and broker.proc.poll() is None, broker.log_tail()

    send_one()
    sender._drop()
    assert sender.outcomes["answered"] > 0 and sender.outcomes["closed"] > 0, sender.outcomes

    _no_traceback(broker)

    topic = unique("after-fuzz")
    p = Producer(quiet({"bootstrap.servers": broker.bootstrap, "acks": "all"}))
    for i in range(5):
        p.produce(topic, value=b"v%d" % i)
    assert p.flush(30) == 0
    got = consume_range(broker.bootstrap, topic, [0], 5)
    assert [m.value() for m in got] == [b"v%d" % i for i in range(5)]


def _first_traceback(log: str) -> str:
    lines = log.splitlines()
    at = next(i for i, line in enumerate(lines) if "Traceback" in line)
    return "\n".join(lines[max(0, at - 3) : at + 40])
