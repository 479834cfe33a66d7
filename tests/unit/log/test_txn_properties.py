"""Property test: any interleaving of plain batches, transactional batches of
several producers and their markers gives the LSO, aborted list, committed
scan and read_committed bound a reference model computes; and a reopen from
the checkpoint at any point rebuilds the same state."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ingest.log.partition import PartitionLog
from ingest.log.topic_config import TopicConfigRegistry
from ingest.metadata import MemoryMetadataStore
from ingest.protocol.errors import ErrorCode
from ingest.protocol.records import build_batch, decode_records, split_batches
from ingest.s3stream import MemoryStreamEngine

_PRODUCERS = (1, 2, 3)

# an operation: ("plain",), ("data", pid), ("end", pid, commit), ("checkpoint",)
ops = st.lists(
    st.one_of(
        st.just(("plain",)),
        st.tuples(st.just("data"), st.sampled_from(_PRODUCERS)),
        st.tuples(st.just("end"), st.sampled_from(_PRODUCERS), st.booleans()),
        st.just(("checkpoint",)),
    ),
    max_size=30,
)


@dataclass
class _Model:
    """What Kafka's rules say the partition holds."""

    offset: int = 0
    batches: list[tuple[int, int | None, bytes]] = field(default_factory=list)  # offset, pid, value
    open: dict[int, int] = field(default_factory=dict)  # pid -> first offset
    txn_of: dict[int, tuple[int, int]] = field(default_factory=dict)  # batch offset -> (pid, first)
    fate: dict[tuple[int, int], bool] = field(default_factory=dict)  # (pid, first) -> committed
    aborted: list[tuple[int, int]] = field(default_factory=list)

    def lso(self) -> int:
        return min(self.open.values(), default=self.offset)

    def committed_values(self) -> list[bytes]:
        lso = self.lso()
        out = []
        for off, pid, value in self.batches:
            if off >= lso:
                break
            if pid is None or self.fate.get(self.txn_of[off], False):
                out.append(value)
        return out


async def _run(script: list[tuple[object, ...]]) -> None:
    engine = MemoryStreamEngine()
    await engine.start()
    store = MemoryMetadataStore()
    cfg = TopicConfigRegistry.default().resolved({})
    log = PartitionLog("t", 0, await engine.create_stream(), lambda: cfg, txn_store=store)
    log.txn_checkpoints.interval_s = 0  # no pause between saves in a test
    model = _Model()
    seqs = dict.fromkeys(_PRODUCERS, 0)
    snapshot = None  # the checkpoint of the last explicit save: what a crash right after leaves
    try:
        for n, op in enumerate(script):
            value = b"v%d" % n
            if op[0] == "checkpoint":
                await log.save_txn_checkpoint()
                snapshot = store.get_txn_checkpoint(log.stream.stream_id)
                assert snapshot is not None
                continue
            if op[0] == "end":
                pid, commit = int(op[1]), bool(op[2])  # type: ignore[call-overload]
                out = log.write_marker(pid, 0, commit, 0)
                first = model.open.pop(pid, None)
                if first is not None:
                    model.fate[(pid, first)] = commit
                    if not commit:
                        model.aborted.append((pid, first))
            else:
                pid = int(op[1]) if op[0] == "data" else -1  # type: ignore[call-overload]
                batch = build_batch(
                    [(None, value, [], 1000)],
                    producer_id=pid,
                    producer_epoch=0 if pid >= 0 else -1,
                    base_sequence=seqs[pid] if pid >= 0 else -1,
                    attributes=0x10 if pid >= 0 else 0,
                )
                out = log.append(batch)
                if pid >= 0:
                    seqs[pid] += 1
                    first = model.open.setdefault(pid, model.offset)
                    model.txn_of[model.offset] = (pid, first)
                model.batches.append((model.offset, pid if pid >= 0 else None, value))
            assert out.error == ErrorCode.none and out.durable is not None, out
            await out.durable
            model.offset += 1

        hw = log.high_watermark
        assert hw == model.offset
        assert log.last_stable_offset == model.lso()
        assert sorted(log.aborted_transactions(0, hw)) == sorted(model.aborted)
        committed: list[bytes] = []
        async for view, h, _ in log.scan(0, committed_only=True):
            committed.extend(r.value or b"" for r in decode_records(view, h))
        assert committed == model.committed_values()
        res = await log.read(0, 1 << 20, read_committed=True)
        ends = (
            [h.last_offset + 1 for h in split_batches(memoryview(res.records))]
            if res.records
            else [0]
        )
        assert max(ends) <= model.lso()

        # a crash right after the last explicit checkpoint (everything appended is
        # durable): the reopen replays from it; with a tiny window only the
        # checkpoint can tell where older transactions are. Without any
        # checkpoint the window (larger than this log) is the fallback.
        crashed = MemoryMetadataStore()
        if snapshot is not None:
            crashed.put_txn_checkpoint(log.stream.stream_id, snapshot)
        fresh = PartitionLog("t", 0, log.stream, log._config, txn_store=crashed)
        await fresh.rebuild_producer_state(window=1 if snapshot is not None else 10_000)
        assert fresh.last_stable_offset == model.lso()
        assert sorted(fresh.aborted_transactions(0, hw)) == sorted(model.aborted)
        # and the table topics' view is the same
        again: list[bytes] = []
        async for view, h, _ in fresh.scan(0, committed_only=True):
            again.extend(r.value or b"" for r in decode_records(view, h))
        assert again == committed
    finally:
        await engine.close()


@settings(max_examples=400, deadline=None)
@given(ops)
# checkpoints taken while an ended transaction spans the LSO (found by this test)
@example([("data", 3), ("data", 1), ("data", 3), ("end", 3, False), ("checkpoint",)])
@example(
    [
        ("data", 1),
        ("data", 2),
        ("data", 1),
        ("end", 1, False),
        ("data", 1),
        ("end", 2, False),
        ("checkpoint",),
    ]
)
def test_the_partition_follows_kafkas_transaction_rules(script: list[tuple[object, ...]]) -> None:
    asyncio.run(_run(script))
