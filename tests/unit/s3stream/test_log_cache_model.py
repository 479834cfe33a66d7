"""The log cache against a plain model of it, over random sequences of
appends, picks, uploads, evictions, trims and drops.

The cache keeps its upload bookkeeping as index arithmetic and binary
searches (``ingest/s3stream/cache/log_cache.py`` says why); the model walks
entry by entry, as the cache once did. Every observable answer must agree.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.s3stream.api import StreamBatch
from ingest.s3stream.cache import LogCache


@dataclass
class _Entry:
    base: int
    end: int
    size: int
    wal: int
    uploaded: bool = False
    picked: bool = False
    live: bool = True


@dataclass
class _Stream:
    entries: list[_Entry] = field(default_factory=list)
    next_offset: int = 0


class _Model:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.streams: dict[int, _Stream] = {}
        self.uploaded: deque[tuple[int, _Entry]] = deque()

    def live(self, sid: int) -> list[_Entry]:
        s = self.streams.get(sid)
        return [e for e in s.entries if e.live] if s else []

    def size(self) -> int:
        return sum(e.size for s in self.streams.values() for e in s.entries if e.live)

    def unuploaded(self) -> int:
        return sum(
            e.size for s in self.streams.values() for e in s.entries if e.live and not e.uploaded
        )

    def put(self, sid: int, count: int, size: int, wal: int) -> None:
        s = self.streams.setdefault(sid, _Stream())
        s.entries.append(_Entry(s.next_offset, s.next_offset + count, size, wal))
        s.next_offset += count

    def pending(self, sid: int, below: int, max_bytes: int | None) -> list[int]:
        out: list[int] = []
        total = 0
        for e in self.live(sid):
            if e.uploaded or e.picked:
                continue
            if e.end > below or (max_bytes is not None and total >= max_bytes):
                break
            out.append(e.base)
            total += e.size
        return out

    def mark_picked(self, sid: int, upto: int) -> None:
        for e in self.live(sid):
            if not e.uploaded and e.end <= upto:
                e.picked = True

    def unpick_all(self) -> None:
        for s in self.streams.values():
            for e in s.entries:
                if not e.uploaded:
                    e.picked = False

    def mark_uploaded(self, sid: int, upto: int) -> None:
        for e in self.live(sid):
            if not e.uploaded and e.end <= upto:
                e.uploaded = True
                self.uploaded.append((sid, e))

    def evict(self) -> int:
        freed = 0
        while self.size() > self.capacity and self.uploaded:
            sid, e = self.uploaded.popleft()
            if e.live and self.streams.get(sid) is not None:
                e.live = False
                freed += e.size
        return freed

    def trim(self, sid: int, start: int) -> None:
        for e in self.live(sid):
            if not (e.uploaded and e.end <= start):
                break
            e.live = False

    def drop(self, sid: int) -> None:
        s = self.streams.pop(sid, None)
        if s is not None:
            for e in s.entries:
                e.live = False
            # a stream id used again starts from offset 0, as a new stream does
            self.uploaded = deque((i, e) for i, e in self.uploaded if i != sid)

    def pending_streams(self) -> list[int]:
        return sorted(
            sid
            for sid, s in self.streams.items()
            if any(e.live and not e.uploaded and not e.picked for e in s.entries)
        )

    def min_wal(self) -> int | None:
        found = [
            next((e.wal for e in self.live(sid) if not e.uploaded), None) for sid in self.streams
        ]
        values = [w for w in found if w is not None]
        return min(values) if values else None


_SIDS = st.integers(0, 2)
# few distinct sizes and offsets, so that byte limits are met exactly and
# ranges line up with entry ends
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), _SIDS, st.integers(1, 3), st.sampled_from([0, 50, 100, 200])),
        st.tuples(st.just("pick"), _SIDS, st.integers(0, 30)),
        st.tuples(st.just("upload"), _SIDS, st.integers(0, 30)),
        st.tuples(
            st.just("pending"),
            _SIDS,
            st.integers(0, 30),
            st.none() | st.sampled_from([0, 50, 100, 150, 200, 400]),
        ),
        st.tuples(st.just("evict")),
        st.tuples(st.just("unpick")),
        st.tuples(st.just("trim"), _SIDS, st.integers(0, 30)),
        st.tuples(st.just("drop"), _SIDS),
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(capacity=st.sampled_from([1, 100, 250, 500, 1000]), ops=_OPS)
def test_the_cache_answers_as_the_model_does(capacity: int, ops: list[tuple[Any, ...]]) -> None:
    # the engine's setting is at least 1 MiB; small ones make evictions here
    cache, model = LogCache(capacity), _Model(capacity)
    wal = 0
    for op in ops:
        kind = op[0]
        if kind == "put":
            _, sid, count, size = op
            base = model.streams[sid].next_offset if sid in model.streams else 0
            cache.put(StreamBatch(sid, base, count, b"x" * size), wal)
            model.put(sid, count, size, wal)
            wal += 1
        elif kind == "pick":
            _, sid, upto = op
            cache.mark_picked(sid, upto)
            model.mark_picked(sid, upto)
        elif kind == "upload":
            _, sid, upto = op
            cache.mark_uploaded(sid, upto)
            model.mark_uploaded(sid, upto)
        elif kind == "pending":
            _, sid, below, max_bytes = op
            got, nbytes = cache.pending_with_bytes(sid, below, max_bytes)
            assert [e.batch.base_offset for e in got] == model.pending(sid, below, max_bytes)
            assert nbytes == sum(e.size for e in got)
        elif kind == "evict":
            assert cache.evict() == model.evict()
        elif kind == "unpick":
            cache.unpick_all()
            model.unpick_all()
        elif kind == "trim":
            _, sid, start = op
            cache.trim(sid, start)
            model.trim(sid, start)
        else:
            _, sid = op
            cache.drop_stream(sid)
            model.drop(sid)
        assert cache.size == model.size()
        assert cache.unuploaded_bytes == model.unuploaded()
        assert sorted(cache.streams_with_pending()) == model.pending_streams()
        assert cache.min_unuploaded_wal_position() == model.min_wal()
        for sid in range(3):
            live = model.live(sid)
            assert cache.first_offset(sid) == (live[0].base if live else None)
            served = cache.get(sid, live[0].base, 10**9, 10**9) if live else []
            assert [b.base_offset for b in served] == [e.base for e in live]


def test_a_dropped_stream_does_not_make_its_successor_evicted_first() -> None:
    """Eviction goes in upload order; what a dropped stream had uploaded must
    not count for a new stream of the same id."""
    c = LogCache(250)
    c.put(StreamBatch(1, 0, 1, b"x" * 100), 0)
    c.mark_uploaded(1, 1)
    c.drop_stream(1)
    c.put(StreamBatch(2, 0, 1, b"x" * 100), 1)
    c.mark_uploaded(2, 1)
    c.put(StreamBatch(1, 0, 1, b"x" * 100), 2)
    c.mark_uploaded(1, 1)
    c.put(StreamBatch(3, 0, 1, b"x" * 100), 3)
    assert c.evict() == 100
    assert c.first_offset(2) is None  # the older upload went
    assert c.first_offset(1) == 0


def test_eviction_stops_once_the_cache_is_back_at_its_capacity() -> None:
    c = LogCache(100)
    for i in range(3):
        c.put(StreamBatch(0, i, 1, b"x" * 50), i)
    c.mark_uploaded(0, 3)
    assert c.evict() == 50
    assert c.size == 100
    assert c.first_offset(0) == 1
