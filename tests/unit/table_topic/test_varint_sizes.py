"""The bulk decoder's varint sizes: the C walk and numpy's agree with what an
Avro encoder writes, at every 7-bit boundary and at the int64 extremes."""

from __future__ import annotations

import numpy as np
import pytest

from ingest.protocol.record_scan import NATIVE
from table_topic.decode import avro_bulk


def _encoded_len(u: int) -> int:
    n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


def _values() -> np.ndarray:
    edges: list[int] = [0, 1, -1, 2**63 - 1, -(2**63)]
    for b in range(7, 64, 7):
        for x in (2**b - 1, 2**b, 2**b + 1):
            if x < 2**63:
                edges += [x, -x]
    rng = np.random.default_rng(7)
    wide = rng.integers(-(2**63), 2**63 - 1, 2_000, dtype=np.int64, endpoint=True)
    return np.concatenate([np.array(edges, np.int64), wide])


def _zigzag(v: int) -> int:
    return ((v << 1) ^ (v >> 63)) & (2**64 - 1)


@pytest.mark.parametrize("native", [True, False])
def test_zigzag_and_unsigned_sizes_match_the_encoding(
    native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if native:
        assert NATIVE is not None, "the C module is built with the package"
    else:
        monkeypatch.setattr(avro_bulk, "NATIVE", None)
    v = _values()
    zig = avro_bulk._zigzag_size(v)
    assert zig.tolist() == [_encoded_len(_zigzag(int(x))) for x in v]
    unsigned = avro_bulk._varint_size(v.view(np.uint64))
    assert unsigned.tolist() == [_encoded_len(int(x) & (2**64 - 1)) for x in v]
    if native:  # the C walk's unsigned mode, called as it is
        assert NATIVE is not None
        out = np.empty(len(v), np.int64)
        NATIVE.varint_sizes(v, out, False)
        assert out.tolist() == unsigned.tolist()
    # writable: the size walk adds into what it gets back
    zig += 1
