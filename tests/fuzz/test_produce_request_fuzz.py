"""The Produce reader that keeps record batches in the frame agrees with
kio's generic reader on every frame: the same entity, or both refuse it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingest.protocol.codec import (
    ProtocolError,
    _reader,
    check_request,
    decode_request,
    parse_request_header,
    request_class,
)
from ingest.protocol.errors import KafkaError
from ingest.protocol.produce_request import PRODUCE_VERSIONS
from tests.fuzz.conftest import fuzz_settings
from tests.fuzz.frames import request_frame


def kio_decode(frame: memoryview) -> Any:
    """What decode_request did for Produce before it had its own reader."""
    header = parse_request_header(frame)
    cls = request_class(header.api_key, header.api_version)
    body, offset = check_request(header, frame)
    try:
        result = _reader(cls)(body, offset)
    except KafkaError:
        raise
    except Exception as exc:
        raise ProtocolError(str(exc)) from exc
    return result[0] if isinstance(result, tuple) else result


def _outcome(decode: Any, frame: memoryview) -> Any:
    try:
        return decode(frame)
    except ProtocolError:
        return ProtocolError


def _plain(entity: Any) -> Any:
    """Records as bytes, so entities compare by value whatever holds them."""
    if entity is ProtocolError:
        return entity
    return (
        entity.transactional_id,
        int(entity.acks),
        entity.timeout,
        [
            (t.name, [(int(p.index), None if p.records is None else bytes(p.records)) for p in t.partition_data])
            for t in entity.topic_data
        ],
    )


@pytest.mark.parametrize("version", list(PRODUCE_VERSIONS))
def test_mutated_produce_frames_read_as_kio_reads_them(version: int) -> None:
    @fuzz_settings(120)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        frame = memoryview(data.draw(request_frame(0, version)))
        try:
            parse_request_header(frame)
        except ProtocolError:
            return
        ours = _outcome(lambda f: decode_request(parse_request_header(f), f), frame)
        theirs = _outcome(kio_decode, frame)
        assert _plain(ours) == _plain(theirs)

    run()
