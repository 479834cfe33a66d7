"""Object formats of the S3Stream engine (stream set objects)."""

from __future__ import annotations

from ingest.s3stream.objects.format import (
    FOOTER_SIZE,
    FORMAT_VERSION,
    IndexEntry,
    StreamRange,
    decode_index,
    encode,
    iter_batches,
)
from ingest.s3stream.objects.reader import read_index

__all__ = [
    "FOOTER_SIZE",
    "FORMAT_VERSION",
    "IndexEntry",
    "StreamRange",
    "decode_index",
    "encode",
    "iter_batches",
    "read_index",
]
