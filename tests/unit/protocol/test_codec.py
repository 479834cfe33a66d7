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
