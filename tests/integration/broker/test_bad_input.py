"""Bad input over raw sockets: the broker answers with Kafka's error or closes
that one connection, keeps serving everyone else, and loses nothing it
acknowledged."""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterator
from typing import Any

import crc32c
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ingest.protocol.records import Compression, build_batch
from tests.integration.broker.conftest import RECENT_TS, consume_range, create_topic, quiet, unique
from tests.integration.broker.rawkafka import RawClient
from tests.support.platform import TidelakeProcess

CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
INVALID_RECORD = 87
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47

WITNESS = unique("witness")
WITNESS_COUNT = 20


@pytest.fixture(scope="module")
def broker(tidelake: TidelakeProcess) -> TidelakeProcess:
    """The module's broker, holding acknowledged records on a witness topic."""
    create_topic(tidelake.bootstrap, WITNESS, partitions=2)
    p = Producer(quiet({"bootstrap.servers": tidelake.bootstrap, "acks": "all"}))
    failures: list[Any] = []
    for i in range(WITNESS_COUNT):
        p.produce(
            WITNESS,
            value=f"w{i}".encode(),
            partition=i % 2,
            on_delivery=lambda err, _m: failures.append(err) if err else None,
        )
    assert p.flush(30) == 0 and not failures
    return tidelake


@pytest.fixture(autouse=True)
def still_serving(broker: TidelakeProcess) -> Iterator[None]:
    """After every bad input, a fresh client is served and nothing acknowledged is gone."""
    yield
    assert broker.proc is not None and broker.proc.poll() is None, broker.log_tail()
    got = consume_range(broker.bootstrap, WITNESS, [0, 1], WITNESS_COUNT, timeout=20)
    for part in (0, 1):
        values = [m.value() for m in got if m.partition() == part]
        assert values == [f"w{i}".encode() for i in range(part, WITNESS_COUNT, 2)]
    topic = unique("after")
    p = Producer(quiet({"bootstrap.servers": broker.bootstrap, "acks": "all"}))
    p.produce(topic, value=b"fresh")
    assert p.flush(20) == 0
    [m] = consume_range(broker.bootstrap, topic, [0], 1)
    assert m.value() == b"fresh"


def _batch(n: int = 3, size: int = 10, **kw: Any) -> bytearray:
    return bytearray(
        build_batch([(b"k%d" % i, b"v" * size, [], RECENT_TS + i) for i in range(n)], **kw)
    )


def _produce_request(
    topic: str, records: bytes, partition: int = 0, acks: int = -1
) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout": 10_000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": records}]}
        ],
    }


def _produce_raw(broker: TidelakeProcess, topic: str, records: bytes, partition: int = 0) -> Any:
    """Produce (v3, acks=all) over a raw socket; returns the partition response."""
    with RawClient(broker.bootstrap) as c:
        resp = c.request(0, 3, _produce_request(topic, records, partition))
    [t] = resp.responses
    [p] = t.partition_responses
    return p


# --- framing -----------------------------------------------------------------------------


def test_truncated_frame_then_close_leaves_the_broker_serving(broker: TidelakeProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        c.send_raw(struct.pack(">i", 100) + b"\x00\x03\x00\x01" + b"\x00" * 6)
    with RawClient(broker.bootstrap) as c:
        c.send_raw(b"\x00\x00")  # not even a length prefix


def test_a_half_sent_frame_does_not_hold_up_other_clients(broker: TidelakeProcess) -> None:
    with RawClient(broker.bootstrap) as stalled:
        stalled.send_raw(struct.pack(">i", 1000) + stalled.header(3, 1))
        got = consume_range(broker.bootstrap, WITNESS, [0, 1], WITNESS_COUNT, timeout=20)
        assert len(got) == WITNESS_COUNT
        # The stalled connection finishes its request later and is answered.
        rest = struct.pack(">i", 0)
        stalled.send_raw(rest + b"\0" * (1000 - len(stalled.header(3, 1)) - len(rest)))
        frame = stalled.recv_frame()
        assert struct.unpack_from(">i", frame)[0] == 1


@pytest.mark.parametrize("size", [-1, -(2**31), 2**31 - 1, 200 * 1024 * 1024])
def test_negative_or_oversize_length_prefix_closes_the_connection(
    broker: TidelakeProcess, size: int
) -> None:
    with RawClient(broker.bootstrap) as c:
        c.send_raw(struct.pack(">i", size) + b"\x00" * 16)
        assert c.is_closed_by_peer()


@pytest.mark.parametrize("size", [0, 3, 7])
def test_frame_shorter_than_a_request_header_closes_the_connection(
    broker: TidelakeProcess, size: int
) -> None:
    with RawClient(broker.bootstrap) as c:
        c.send_frame(b"\x00" * size)
        assert c.is_closed_by_peer()


@pytest.mark.parametrize("api_key", [999, -1, 67, 32767])  # 67: AllocateProducerIds, broker-to-controller only
def test_unknown_api_key_closes_the_connection(broker: TidelakeProcess, api_key: int) -> None:
    with RawClient(broker.bootstrap) as c:
        c.send_frame(c.header(api_key, 0) + b"\x00" * 8)
        assert c.is_closed_by_peer()


def test_api_versions_with_an_unsupported_version_gets_a_v0_error_and_the_api_list(
    broker: TidelakeProcess,
) -> None:
    with RawClient(broker.bootstrap) as c:
        c.send_frame(c.header(18, 99, correlation_id=4242) + b"\x02\x07garbage\x00\x01\x02")
        frame = c.recv_frame()
        corr, error, count = struct.unpack_from(">ihi", frame, 0)
        assert (corr, error) == (4242, UNSUPPORTED_VERSION)
        apis = {}
        for i in range(count):
            key, lo, hi = struct.unpack_from(">hhh", frame, 10 + 6 * i)
            apis[key] = (lo, hi)
        assert len(frame) == 10 + 6 * count  # a plain v0 body, nothing after it
        assert apis[18][0] == 0 and apis[18][1] >= 3
        assert {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 19, 20} <= set(apis)
        # The connection stays usable: a supported ApiVersions now succeeds.
        resp = c.request(18, 0, {})
        assert int(resp.error_code) == 0


@pytest.mark.parametrize(
    ("name", "version", "error"),
    [
        ("librdkafka", "2.6.0", 0),
        ("my-client.x", "1.0.0-rc1", 0),
        ("", "1.0", INVALID_REQUEST),
        ("bad name", "1.0", INVALID_REQUEST),
        ("client", "-1.0", INVALID_REQUEST),
        ("client", "1.0.", INVALID_REQUEST),
    ],
)
def test_api_versions_v3_checks_the_client_software_name_and_version(
    broker: TidelakeProcess, name: str, version: str, error: int
) -> None:
    with RawClient(broker.bootstrap) as c:
        resp = c.request(
            18, 3, {"client_software_name": name, "client_software_version": version}
        )
        assert int(resp.error_code) == error
        assert (len(resp.api_keys) > 0) == (error == 0)
        assert int(c.request(18, 3, {"client_software_name": "ok", "client_software_version": "1"}).error_code) == 0


@pytest.mark.parametrize(("api_key", "version"), [(3, 99), (0, 0), (1, 99), (19, -1)])
def test_unsupported_version_of_another_api_closes_the_connection(
    broker: TidelakeProcess, api_key: int, version: int
) -> None:
    with RawClient(broker.bootstrap) as c:
        c.send_frame(c.header(api_key, version) + b"\x00" * 16)
        assert c.is_closed_by_peer()


def test_a_client_id_longer_than_the_frame_closes_the_connection(
    broker: TidelakeProcess,
) -> None:
    with RawClient(broker.bootstrap) as c:
        c.send_frame(struct.pack(">hhih", 3, 1, 1, 30000) + b"abc")
        assert c.is_closed_by_peer()


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        (3, 1, b"\x7f\xff\xff\xff"),  # a topics array of 2**31-1 entries, then nothing
        (3, 1, b"\x00\x00\x00\x02\x00\x05ab"),  # a string longer than the frame
        (0, 3, b"\xff\xff\x00\x01\x00\x00\x27\x10\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01"),
        (19, 2, b"\xde\xad\xbe\xef" * 3),
        (3, 9, b"\x80\x80\x80\x80\x80\x80\x80"),  # flexible: an endless varint
        (3, 12, b""),
    ],
    ids=["huge-array", "long-string", "produce-truncated", "junk", "endless-varint", "empty"],
)
def test_garbage_request_body_closes_the_connection(
    broker: TidelakeProcess, api_key: int, version: int, body: bytes
) -> None:
    with RawClient(broker.bootstrap) as c:
        c.send_frame(c.header(api_key, version) + body)
        assert c.is_closed_by_peer()


def test_pipelined_requests_are_answered_in_order(broker: TidelakeProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        frames = b""
        for corr in range(1, 41):
            payload = c.header(18 if corr % 2 else 3, 0 if corr % 2 else 1, corr)
            payload += b"" if corr % 2 else struct.pack(">i", 0)
            frames += struct.pack(">i", len(payload)) + payload
        c.send_raw(frames)
        corrs = [struct.unpack_from(">i", c.recv_frame())[0] for _ in range(40)]
        assert corrs == list(range(1, 41))


def test_metadata_v0_with_an_empty_topic_list_returns_every_topic(broker: TidelakeProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        resp = c.request(3, 0, {"topics": []})
    assert WITNESS in {t.name for t in resp.topics}


# --- requests with bad content ------------------------------------------------------------


@pytest.mark.parametrize("name", ["bad name!", "", "..", "a" * 250])
def test_create_topics_with_an_invalid_name_returns_invalid_topic_exception(
    broker: TidelakeProcess, name: str
) -> None:
    with RawClient(broker.bootstrap) as c:
        resp = c.request(
            19,
            2,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout": 5000,
                "validate_only": False,
            },
        )
    [t] = resp.topics
    assert int(t.error_code) == INVALID_TOPIC_EXCEPTION


def test_produce_with_a_wrong_crc_returns_corrupt_message(broker: TidelakeProcess) -> None:
    topic = unique("crc")
    create_topic(broker.bootstrap, topic)
    batch = _batch()
    batch[-1] ^= 0xFF  # payload byte changed after the CRC was computed
    p = _produce_raw(broker, topic, bytes(batch))
    assert int(p.error_code) == CORRUPT_MESSAGE
    good = _produce_raw(broker, topic, bytes(_batch()))
    assert (int(good.error_code), good.base_offset) == (0, 0)


@pytest.mark.parametrize(
    "mangle",
    ["truncated", "length-too-long", "length-too-short", "negative-count"],
)
def test_produce_with_a_malformed_batch_is_rejected_and_nothing_is_appended(
    broker: TidelakeProcess, mangle: str
) -> None:
    topic = unique("malformed")
    create_topic(broker.bootstrap, topic)
    batch = _batch()
    if mangle == "truncated":
        batch = batch[:40]
    elif mangle == "length-too-long":
        struct.pack_into(">i", batch, 8, len(batch) + 100)
    elif mangle == "length-too-short":
        struct.pack_into(">i", batch, 8, 20)
    else:
        struct.pack_into(">i", batch, 57, -1)
    p = _produce_raw(broker, topic, bytes(batch))
    assert int(p.error_code) in (CORRUPT_MESSAGE, INVALID_RECORD)
    good = _produce_raw(broker, topic, bytes(_batch()))
    assert (int(good.error_code), good.base_offset) == (0, 0)


def _with_body(body: bytes, attributes: int, count: int = 1) -> bytes:
    """A v2 batch with the given (already encoded) records section and a valid CRC."""
    header = bytearray(_batch(1))[:61]
    struct.pack_into(">i", header, 8, 61 - 12 + len(body))
    struct.pack_into(">h", header, 21, attributes)
    struct.pack_into(">i", header, 23, count - 1)
    struct.pack_into(">i", header, 57, count)
    out = header + body
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


@pytest.mark.parametrize(
    "case", ["gzip-garbage", "records-garbage", "key-overruns-record", "bytes-after-records"]
)
def test_produce_with_records_that_cannot_be_decoded_is_rejected(
    broker: TidelakeProcess, case: str
) -> None:
    """Kafka validates the records inside a batch (decompressing it); a batch whose
    CRC is right but whose records are not must not reach consumers."""
    topic = unique("undecodable")
    create_topic(broker.bootstrap, topic)
    if case == "gzip-garbage":
        records = _with_body(b"definitely not gzip", Compression.GZIP)
    elif case == "records-garbage":
        records = _with_body(b"\x7f\x00\x01\x02", Compression.NONE)
    elif case == "key-overruns-record":
        record = b"\x00\x00\x00" + b"\xc8\x01" + b"\x02v\x00"  # key of 100 bytes: absent
        records = _with_body(bytes([len(record) * 2]) + record, Compression.NONE)
    else:
        body = bytes(_batch(1))[61:]
        records = _with_body(body + b"\x00\x00", Compression.NONE)
    p = _produce_raw(broker, topic, records)
    assert int(p.error_code) in (CORRUPT_MESSAGE, INVALID_RECORD)
    good = _produce_raw(broker, topic, bytes(_batch()))
    assert (int(good.error_code), good.base_offset) == (0, 0)
    got = consume_range(broker.bootstrap, topic, [0], 3)
    assert [m.offset() for m in got] == [0, 1, 2]


def test_valid_gzip_batch_built_by_hand_is_accepted(broker: TidelakeProcess) -> None:
    topic = unique("gzip-by-hand")
    create_topic(broker.bootstrap, topic)
    plain = bytes(_batch(2))[61:]
    p = _produce_raw(broker, topic, _with_body(gzip.compress(plain), Compression.GZIP, 2))
    assert int(p.error_code) == 0
    got = consume_range(broker.bootstrap, topic, [0], 2)
    assert [(m.key(), m.offset()) for m in got] == [(b"k0", 0), (b"k1", 1)]


def test_batch_over_max_message_bytes_returns_message_too_large(broker: TidelakeProcess) -> None:
    topic = unique("small")
    create_topic(broker.bootstrap, topic, **{"max.message.bytes": "1000"})
    p = _produce_raw(broker, topic, bytes(_batch(n=2, size=1000)))
    assert int(p.error_code) == MESSAGE_TOO_LARGE
    p = _produce_raw(broker, topic, bytes(_batch(n=2, size=100)))
    assert (int(p.error_code), p.base_offset) == (0, 0)


def test_produce_to_an_unknown_topic_or_partition_returns_unknown_topic_or_partition(
    broker: TidelakeProcess,
) -> None:
    p = _produce_raw(broker, unique("never-created"), bytes(_batch()))
    assert int(p.error_code) == UNKNOWN_TOPIC_OR_PARTITION
    p = _produce_raw(broker, WITNESS, bytes(_batch()), partition=7)
    assert int(p.error_code) == UNKNOWN_TOPIC_OR_PARTITION


def test_idempotent_sequence_errors_are_reported_and_duplicates_get_their_offset(
    broker: TidelakeProcess,
) -> None:
    topic = unique("sequences")
    create_topic(broker.bootstrap, topic)
    with RawClient(broker.bootstrap) as c:
        pid = int(
            c.request(22, 0, {"transactional_id": None, "transaction_timeout": 60_000}).producer_id
        )

    def send(epoch: int, seq: int, n: int = 1) -> tuple[int, int]:
        p = _produce_raw(
            broker,
            topic,
            bytes(_batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq)),
        )
        return int(p.error_code), int(p.base_offset)

    assert send(0, 0, 2) == (0, 0)
    assert send(0, 2, 3) == (0, 2)
    assert send(0, 7) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)  # a gap
    assert send(0, 0, 2) == (0, 0)  # a retry of an earlier batch: its offset, not a copy
    assert send(0, 5) == (0, 5)
    assert send(1, 0) == (0, 6)  # a bumped epoch starts again at 0
    assert send(0, 6) == (INVALID_PRODUCER_EPOCH, -1)  # fenced
    got = consume_range(broker.bootstrap, topic, [0], 7)
    assert [m.offset() for m in got] == list(range(7))
    c = Consumer(quiet({"bootstrap.servers": broker.bootstrap, "group.id": unique("wm")}))
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 7)
    finally:
        c.close()


def test_failed_acks_0_produce_closes_the_connection_and_a_good_one_does_not(
    broker: TidelakeProcess,
) -> None:
    """With acks=0 there is no response; Kafka closes the connection on a failed
    produce so the client finds out."""
    topic = unique("acks0")
    create_topic(broker.bootstrap, topic)
    bad = _batch()
    bad[-1] ^= 0xFF
    for records, partition in ((bytes(bad), 0), (bytes(_batch()), 9)):
        with RawClient(broker.bootstrap) as c:
            c.send_frame(c.encode(0, 3, _produce_request(topic, records, partition, acks=0)))
            assert c.is_closed_by_peer()
    with RawClient(broker.bootstrap) as c:
        c.send_frame(c.encode(0, 3, _produce_request(topic, bytes(_batch(2)), acks=0)))
        assert not c.is_closed_by_peer(timeout=1)
        resp = c.request(18, 0, {})  # still open and answering
        assert int(resp.error_code) == 0
    got = consume_range(broker.bootstrap, topic, [0], 2)
    assert [m.offset() for m in got] == [0, 1]
