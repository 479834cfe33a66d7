"""The request decoder, for every API and version the broker serves: random
and mutated bodies end in a decoded request or a ProtocolError, nothing else,
and no declared length makes it allocate."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingest.protocol.codec import ProtocolError, decode_request, parse_request_header
from tests.fuzz.conftest import fuzz_settings
from tests.fuzz.frames import random_frame, request_frame, served_versions

VERSIONS = served_versions()
API_KEYS = sorted({k for k, _ in VERSIONS})
BY_KEY = {k: [v for kk, v in VERSIONS if kk == k] for k in API_KEYS}
_GROWTH_LIMIT_KB = 64 * 1024  # one decode of a frame of a few KiB


def _kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


def _peak_growth_kb(decode: Callable[[], None]) -> int:
    """How far above the resident size before it ``decode`` took the
    process at its peak, freed or not: the peak (VmHWM) is reset first, so
    what earlier tests left in the allocator cannot move the figure."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak resident size to the current one
    before = _kb("VmRSS")
    decode()
    return _kb("VmHWM") - before


def _decode_only_protocol_errors(frame: bytes) -> None:
    view = memoryview(frame)

    def decode() -> None:
        try:
            header = parse_request_header(view)
            decode_request(header, view)
        except ProtocolError:
            pass
        # Anything else (TypeError, IndexError, KeyError, MemoryError, OverflowError...)
        # propagates and fails the test with the frame hypothesis found.

    grown = _peak_growth_kb(decode)
    assert grown < _GROWTH_LIMIT_KB, f"decoding one frame grew the process by {grown // 1024} MB"


@pytest.mark.parametrize("api_key", API_KEYS)
def test_mutated_requests_decode_or_raise_protocol_error(api_key: int) -> None:
    @fuzz_settings(80)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        version = data.draw(st.sampled_from(BY_KEY[api_key]))
        _decode_only_protocol_errors(data.draw(request_frame(api_key, version)))

    run()


@fuzz_settings(len(VERSIONS) * 2)
@given(st.data())
def test_well_formed_requests_decode(data: st.DataObject) -> None:
    api_key, version = data.draw(st.sampled_from(VERSIONS))
    frame = memoryview(data.draw(request_frame(api_key, version, mutate=False)))
    decode_request(parse_request_header(frame), frame)


@fuzz_settings(len(VERSIONS) * 2)
@given(st.data())
def test_random_bodies_decode_or_raise_protocol_error(data: st.DataObject) -> None:
    api_key, version = data.draw(st.sampled_from(VERSIONS))
    _decode_only_protocol_errors(data.draw(random_frame(api_key, version)))


@fuzz_settings(200)
@given(st.binary(max_size=64))
def test_random_frames_parse_or_raise_protocol_error(frame: bytes) -> None:
    view = memoryview(frame)
    try:
        header = parse_request_header(view)
    except ProtocolError:
        return
    if (header.api_key, header.api_version) in VERSIONS:
        _decode_only_protocol_errors(frame)
