"""Read a stream set object's index straight from the object store."""

from __future__ import annotations

from ingest.s3stream.objects.format import FOOTER_SIZE, IndexEntry, decode_index, index_tail_size
from ingest.s3stream.objectstore.api import ObjectStore

__all__ = ["read_index"]

_TAIL_GUESS = 64 * 1024


async def read_index(store: ObjectStore, key: str, size: int) -> list[IndexEntry]:
    """The verified index of object ``key`` of ``size`` bytes, in one ranged
    GET of its tail (two when the index is larger than the first guess).

    Raises ``CorruptDataError`` when the footer or the index does not verify.
    """
    start = max(0, size - max(_TAIL_GUESS, FOOTER_SIZE))
    tail = await store.get(key, start, size)
    need = index_tail_size(tail)
    if need > len(tail):
        tail = await store.get(key, max(0, size - need), size)
    return decode_index(tail, object_size=size)
