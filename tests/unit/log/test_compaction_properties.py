"""Property: whatever the sequence of updates, deletes, idempotent producers,
aborted transactions, cleaner passes and clock ticks, a consumer reading a
compacted partition from the start ends with each key's latest committed
value at the offset it was written, offsets only grow, and once the
tombstones have expired nothing but the latest live value of each key is
left."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.log.compaction import LogCleaner
from ingest.log.partition import PartitionLog
from ingest.metadata import MemoryMetadataStore
from ingest.protocol.records import decode_records
from ingest.s3stream import MemoryStreamEngine
from tests.unit.log.test_compaction import Clock, _batch, _config, _marker, _ok, _records

KEYS = [b"a", b"b", b"c", b"d"]

_op = st.one_of(
    st.tuples(st.just("put"), st.lists(st.sampled_from(KEYS), min_size=1, max_size=4)),
    st.tuples(st.just("delete"), st.sampled_from(KEYS)),
    st.tuples(st.just("aborted"), st.lists(st.sampled_from(KEYS), min_size=1, max_size=3)),
    st.tuples(st.just("committed"), st.lists(st.sampled_from(KEYS), min_size=1, max_size=3)),
    st.tuples(st.just("clean"), st.just(None)),
    st.tuples(st.just("tick"), st.integers(1, 1500)),
)


async def _run(ops: list[tuple[str, object]]) -> None:
    engine = MemoryStreamEngine()
    await engine.start()
    store, clock = MemoryMetadataStore(), Clock()
    cfg = _config(delete_retention_ms="1000")
    plog = PartitionLog("t", 0, await engine.create_stream(), lambda: cfg, txn_store=store)
    cleaner = LogCleaner(lambda: [(plog, cfg)], store, clock_ms=clock)
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    seq = {5: 0, 6: 0}
    n = 0

    async def committed() -> list[tuple[int, bytes | None, bytes | None]]:
        """What a read_committed consumer gets (aborted records dropped)."""
        out = []
        async for view, h, _ in plog.scan(0, committed_only=True):
            out.extend((r.offset, r.key, r.value) for r in decode_records(view, h))
        return out

    async def check() -> None:
        got = await committed()
        offsets = [o for o, _, _ in got]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        last = {k: (o, v) for o, k, v in got}
        for k, (o, v) in latest.items():
            if v is not None:
                assert last.get(k) == (o, v), (k, last.get(k), (o, v))
            else:  # a deleted key: nothing, or its tombstone, at the end
                assert k not in last or last[k] == (o, None)

    for kind, arg in ops:
        if kind == "put":
            assert isinstance(arg, list)
            values = [(k, b"v%d" % (n + i)) for i, k in enumerate(arg)]
            base = await _ok(plog, _batch(values, ts=clock.now, pid=5, seq=seq[5]))
            seq[5] += len(values)
            for i, (k, v) in enumerate(values):
                latest[k] = (base + i, v)
            n += len(values)
        elif kind == "delete":
            assert isinstance(arg, bytes)
            base = await _ok(plog, _batch([(arg, None)], ts=clock.now))
            latest[arg] = (base, None)
        elif kind in ("aborted", "committed"):
            assert isinstance(arg, list)
            values = [(k, b"t%d" % (n + i)) for i, k in enumerate(arg)]
            base = await _ok(
                plog, _batch(values, ts=clock.now, pid=6, seq=seq[6], transactional=True)
            )
            seq[6] += len(values)
            n += len(values)
            await _marker(plog, 6, commit=kind == "committed")
            if kind == "committed":
                for i, (k, v) in enumerate(values):
                    latest[k] = (base + i, v)
        elif kind == "clean":
            await cleaner.run_once(force=True)
        else:
            assert isinstance(arg, int)
            clock.now += arg
        await check()
    # every tombstone seen, then expired: only live values remain
    await cleaner.run_once(force=True)
    clock.now += 1000
    await cleaner.run_once(force=True)
    await check()
    live = {k: v for k, v in latest.items() if v[1] is not None}
    # read_uncommitted: aborted records are gone too
    got = [(o, k, v) for o, k, v in await _records(plog) if k in KEYS]
    assert {k: (o, v) for o, k, v in got} == live and len(got) == len(live)
    await engine.close()


@settings(max_examples=60, deadline=None)
@given(st.lists(_op, max_size=25))
def test_a_reader_from_the_start_always_ends_with_each_keys_latest_value(
    ops: list[tuple[str, object]],
) -> None:
    asyncio.run(_run(ops))
