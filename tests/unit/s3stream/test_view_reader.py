"""The file-like request body the S3 store reads parts of uploads from."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.s3stream.objectstore.s3 import ViewReader


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=3000), st.lists(st.integers(-1, 700), max_size=12))
def test_reads_in_any_sizes_return_the_view_in_order(data: bytes, sizes: list[int]) -> None:
    backing = b"<" + data + b">"
    body = ViewReader(memoryview(backing)[1 : 1 + len(data)])
    assert len(body) == len(data)
    got = b""
    for n in sizes:
        chunk = body.read(n)
        assert len(chunk) <= (len(data) if n < 0 else n)
        got += chunk
        assert body.tell() == len(got)
    got += body.read()
    assert got == data
    assert body.read(10) == b""


def test_seek_and_readinto_let_a_retry_send_the_body_again() -> None:
    body = ViewReader(memoryview(b"0123456789"))
    assert body.read(4) == b"0123"
    assert body.seek(0) == 0  # botocore rewinds a body to resend it
    buf = bytearray(6)
    assert body.readinto(buf) == 6 and buf == b"012345"
    assert body.seek(-2, io.SEEK_END) == 8 and body.read() == b"89"
    assert body.seek(-3, io.SEEK_CUR) == 7 and body.read(1) == b"7"
    assert body.readinto(bytearray(0)) == 0
    with pytest.raises(ValueError):
        body.seek(-1)
    assert body.seek(50) == 50 and body.read() == b"" and body.readinto(buf) == 0


def test_a_view_of_wider_items_is_read_as_its_bytes() -> None:
    import array

    words = array.array("I", [1, 2, 3])
    body = ViewReader(memoryview(words))
    assert len(body) == 12 and body.read() == words.tobytes()
