"""Request header parsing and versioned response building."""

from __future__ import annotations

import io
import struct

import pytest
from kio.serial import entity_writer

from ingest.protocol.codec import (
    ProtocolError,
    build,
    decode_request,
    encode_response,
    parse_request_header,
    request_class,
    response_class,
)
from ingest.protocol.errors import ErrorCode, KafkaError, error_class


def _frame(
    api_key: int, version: int, body: dict, client_id: str = "test", flexible: bool = True
) -> bytes:  # type: ignore[type-arg]
    cls = request_class(api_key, version)
    buf = io.BytesIO()
    entity_writer(cls)(buf, build(cls, body))
    cid = client_id.encode()
    header = (
        struct.pack(">hhih", api_key, version, 42, len(cid)) + cid + (b"\0" if flexible else b"")
    )
    return header + buf.getvalue()


def test_flexible_header_and_body_parse() -> None:
    frame = memoryview(
        _frame(3, 12, {"topics": [{"name": "orders"}], "allow_auto_topic_creation": True})
    )
    h = parse_request_header(frame)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (3, 12, 42, "test")
    req = decode_request(h, frame)
    assert [t.name for t in req.topics] == ["orders"]


def test_non_flexible_header_has_no_tagged_fields() -> None:
    frame = memoryview(_frame(3, 4, {"topics": [{"name": "a"}]}, flexible=False))
    h = parse_request_header(frame)
    assert decode_request(h, frame).topics[0].name == "a"


def test_truncated_header_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        parse_request_header(memoryview(b"\x00\x03\x00"))
    with pytest.raises(ProtocolError):
        parse_request_header(memoryview(struct.pack(">hhih", 3, 4, 1, 50) + b"abc"))


def test_garbage_body_is_a_protocol_error() -> None:
    frame = memoryview(struct.pack(">hhih", 0, 9, 1, -1) + b"\0" + b"\xff" * 7)
    h = parse_request_header(frame)
    with pytest.raises(ProtocolError):
        decode_request(h, frame)


def test_build_fills_version_specific_fields_and_drops_unknown_ones() -> None:
    values = {
        "throttle_time": 5,
        "error_code": 0,
        "api_keys": [{"api_key": 0, "min_version": 3, "max_version": 9}],
        "not_a_field": 1,
    }
    v0 = build(response_class(18, 0), values)
    v3 = build(response_class(18, 3), values)
    assert not hasattr(v0, "throttle_time")
    assert v3.throttle_time.total_seconds() == 0.005
    assert v3.api_keys[0].max_version == 9


def test_fetch_response_defaults_mean_no_preferred_replica() -> None:
    r = build(
        response_class(1, 12),
        {"responses": [{"topic": "t", "partitions": [{"partition_index": 0}]}]},
    )
    assert r.responses[0].partitions[0].preferred_read_replica == -1


def test_api_versions_response_header_is_always_v0() -> None:
    entity = build(response_class(18, 3), {"api_keys": []})
    framed = encode_response(18, 3, 7, entity)
    size, corr = struct.unpack_from(">ii", framed)
    assert size == len(framed) - 4 and corr == 7
    # v0 header: the body's error code follows the correlation id directly
    assert struct.unpack_from(">h", framed, 8)[0] == 0


def test_every_kafka_error_code_has_its_own_class() -> None:
    cls = error_class(ErrorCode.unknown_topic_or_partition)
    err = cls("no such topic")
    assert isinstance(err, KafkaError) and err.code == 3 and err.retriable
    assert error_class(10) is not cls and error_class(10)().code == 10
    assert error_class(12345)().code == -1


# --- nulls, lengths and tagged fields Kafka's parsers check ------------------------------


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _raw(api_key: int, version: int, body: bytes) -> memoryview:
    flexible = bool(request_class(api_key, version).__flexible__)
    return memoryview(
        struct.pack(">hhih", api_key, version, 1, 1) + b"c" + (b"\0" if flexible else b"") + body
    )


def _decode(frame: memoryview) -> object:
    return decode_request(parse_request_header(frame), frame)


_LIST_OFFSETS_V8_HEAD = struct.pack(">ib", -1, 0)  # replica_id, isolation_level


@pytest.mark.parametrize(
    "frame",
    [
        _raw(2, 8, _LIST_OFFSETS_V8_HEAD + b"\x00" + b"\x00"),  # compact null topics
        _raw(2, 1, struct.pack(">ii", -1, -1)),  # legacy null topics
        _raw(8, 8, b"\x02g" + struct.pack(">i", 1) + b"\x02m" + b"\x00" + b"\x00" + b"\x00"),
        _raw(9, 1, struct.pack(">h", 1) + b"g" + struct.pack(">i", -1)),  # nullable from v2
        _raw(9, 7, b"\x02g" + b"\x02" + b"\x02t" + b"\x00" + b"\x00" + b"\x00" + b"\x00"),
    ],
    ids=["list-offsets-v8", "list-offsets-v1", "offset-commit-v8", "offset-fetch-v1", "indexes"],
)
def test_null_in_a_field_kafka_does_not_mark_nullable_is_a_protocol_error(
    frame: memoryview,
) -> None:
    with pytest.raises(ProtocolError, match="non-nullable field .* null"):
        _decode(frame)


def test_null_topics_in_offset_fetch_v2_and_later_decode_as_none() -> None:
    legacy = _decode(_raw(9, 2, struct.pack(">h", 1) + b"g" + struct.pack(">i", -1)))
    compact = _decode(_raw(9, 7, b"\x02g" + b"\x00" + b"\x00" + b"\x00"))
    assert legacy.topics is None and compact.topics is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("length", [-2, -5, -(2**31)])
def test_negative_array_length_other_than_null_is_a_protocol_error(length: int) -> None:
    with pytest.raises(ProtocolError):
        _decode(_raw(2, 1, struct.pack(">ii", -1, length)))


def test_string_longer_than_kafka_allows_is_a_protocol_error() -> None:
    body = _LIST_OFFSETS_V8_HEAD + b"\x02" + _uvarint(0x8000 + 1) + b"t" * 0x8000 + b"\x00\x00"
    with pytest.raises(ProtocolError, match="invalid length"):
        _decode(_raw(2, 8, body))


_HUGE_ARRAY_PROBE = """
import resource, struct, sys
from ingest.protocol.codec import ProtocolError, decode_request, parse_request_header

def uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)

before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
head = struct.pack(">hhih", 2, 8, 1, 1) + b"c\\0" + struct.pack(">ib", -1, 0)
# 2**24 elements: a few hundred MB reserved; 2**32-2: the process aborted
for count in (2**24, 2**32 - 2):
    for frame in (
        memoryview(head + uvarint(count + 1) + b"\\0"),  # topics
        memoryview(head + b"\\x02\\x02t" + uvarint(count + 1) + b"\\0"),  # partitions
    ):
        try:
            decode_request(parse_request_header(frame), frame)
        except ProtocolError:
            pass
grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
print(grown_mb)
sys.exit(0 if grown_mb < 50 else 1)
"""


def test_huge_declared_array_length_is_refused_before_anything_is_allocated() -> None:
    import subprocess
    import sys

    # In a child process: before the check, kio reserved memory for the declared
    # count, and 2**32-2 elements aborted the interpreter.
    done = subprocess.run(
        [sys.executable, "-c", _HUGE_ARRAY_PROBE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-2000:])


def test_huge_declared_lengths_anywhere_are_protocol_errors() -> None:
    huge = _uvarint(2**32 - 1)
    for body in (
        _LIST_OFFSETS_V8_HEAD + b"\x02" + huge,  # topic name
        _LIST_OFFSETS_V8_HEAD + b"\x01" + b"\x01\x00" + huge,  # a tagged field's size
        _LIST_OFFSETS_V8_HEAD + b"\x01" + huge,  # the number of tagged fields
    ):
        with pytest.raises(ProtocolError):
            _decode(_raw(2, 8, body))


def test_unknown_tagged_fields_are_ignored_as_kafka_does() -> None:
    partition = struct.pack(">iiq", 3, -1, -2)
    unknown = b"\x02" + b"\x07\x02ab" + b"\x09\x01z"  # two tagged fields no schema knows
    body = _LIST_OFFSETS_V8_HEAD + b"\x02" + b"\x02t" + b"\x02" + partition + unknown
    req = _decode(_raw(2, 8, body + unknown + unknown))
    [topic] = req.topics  # type: ignore[attr-defined]
    assert topic.name == "t" and topic.partitions[0].partition_index == 3


def _fetch_v12_with_tags(tags: bytes) -> bytes:
    """A Fetch v12 body (max_wait 100 ms) whose top-level tagged fields are ``tags``."""
    cls = request_class(1, 12)
    entity = build(cls, {"replica_id": -1, "max_wait": 100, "cluster_id": "c1", "topics": []})
    buf = io.BytesIO()
    entity_writer(cls)(buf, entity)
    body = buf.getvalue()
    # The top-level tagged fields come last: count 1, tag 0, then "c1".
    tail = b"\x01\x00\x03\x03c1"
    assert body.endswith(tail)
    return body[: -len(tail)] + tags


def test_known_tagged_field_survives_next_to_unknown_ones() -> None:
    body = _fetch_v12_with_tags(b"\x02\x00\x03\x03c1\x05\x00")
    assert _decode(_raw(1, 12, body)).cluster_id == "c1"  # type: ignore[attr-defined]


def test_a_tagged_field_sent_as_null_reads_as_its_null_default() -> None:
    """Fetch v12's ClusterId is a nullable tagged string: Kafka reads a null
    sent for it (kio's reader cannot, so the check drops it)."""
    body = _fetch_v12_with_tags(b"\x01\x00\x01\x00")  # tag 0, 1 byte: null
    req = _decode(_raw(1, 12, body))
    assert req.cluster_id is None  # type: ignore[attr-defined]
    assert req.max_wait.total_seconds() == 0.1  # type: ignore[attr-defined]


def test_trailing_bytes_after_the_body_are_ignored() -> None:
    frame = _frame(3, 12, {"topics": [{"name": "orders"}]})
    assert [t.name for t in _decode(memoryview(frame + b"\xff" * 9)).topics] == ["orders"]  # type: ignore[attr-defined]
