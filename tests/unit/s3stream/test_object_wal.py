"""The object-store WAL: batching, ordered acknowledgement, retries, recovery, trim;
and the engine on it (recovery on a fresh engine with no local state)."""

from __future__ import annotations

import asyncio
import os

import pytest

from ingest.errors import StorageError
from ingest.metadata import MemoryMetadataStore
from ingest.s3stream import S3StreamConfig, S3StreamEngine, open_engine
from ingest.s3stream.objectstore import MemoryObjectStore
from ingest.s3stream.wal import ObjectWriteAheadLog, WalRecord


class _FlakyStore(MemoryObjectStore):
    """Fails the first ``failures`` puts; delays puts of keys in ``slow``."""

    def __init__(self, objects: dict[str, bytes] | None = None, failures: int = 0) -> None:
        super().__init__(objects)
        self.failures = failures
        self.slow: dict[str, float] = {}
        self.puts: list[str] = []

    async def put(self, key: str, data: bytes | bytearray | memoryview) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise StorageError("injected 500")
        await asyncio.sleep(self.slow.get(key, 0.0))
        self.puts.append(key)
        await super().put(key, data)


async def _recover(wal: ObjectWriteAheadLog) -> list[WalRecord]:
    return [r async for r in wal.recover()]


def _wal(store: MemoryObjectStore, **kw: object) -> ObjectWriteAheadLog:
    return ObjectWriteAheadLog(store, "wal/", batch_interval_ms=2, retry_initial_s=0.01, **kw)  # type: ignore[arg-type]


async def test_appends_are_batched_into_few_objects_and_read_back_in_order() -> None:
    store = MemoryObjectStore()
    wal = _wal(store)
    await wal.start()
    handles = [wal.append(7, i, 1, os.urandom(1000)) for i in range(300)]
    await asyncio.gather(*(h.done for h in handles))
    assert 1 <= wal.puts < 30
    await wal.close()
    wal2 = _wal(MemoryObjectStore(store.objects))
    got = await _recover(wal2)
    assert [(r.stream_id, r.base_offset) for r in got] == [(7, i) for i in range(300)]
    assert [r.position for r in got] == [h.position for h in handles]
    assert wal2.next_position == handles[-1].end_position


async def test_acknowledgements_follow_position_order_when_puts_finish_out_of_order() -> None:
    store = _FlakyStore()
    store.slow["wal/" + f"{0:020d}.wal"] = 0.2
    wal = _wal(store, max_in_flight=4)
    await wal.start()
    first = wal.append(1, 0, 1, b"a" * 100)
    await asyncio.sleep(0.05)
    second = wal.append(1, 1, 1, b"b" * 100)
    order: list[str] = []
    first.done.add_done_callback(lambda _f: order.append("first"))
    second.done.add_done_callback(lambda _f: order.append("second"))
    await asyncio.gather(first.done, second.done)
    assert store.puts[0] != f"wal/{0:020d}.wal"  # the second object landed first
    assert order == ["first", "second"]
    await wal.close()


async def test_failed_puts_are_retried_until_they_land() -> None:
    store = _FlakyStore(failures=5)
    wal = _wal(store)
    await wal.start()
    h = wal.append(1, 0, 1, b"payload")
    await asyncio.wait_for(h.done, 10)
    assert wal.put_retries == 5
    await wal.close()
    assert [r.base_offset for r in await _recover(_wal(MemoryObjectStore(store.objects)))] == [0]


async def test_recovery_stops_at_a_gap_and_drops_what_follows() -> None:
    store = MemoryObjectStore()
    wal = _wal(store)
    await wal.start()
    for i in range(3):
        await wal.append(1, i, 1, b"x" * 10).done
        await asyncio.sleep(0.01)  # one object each
    await wal.close()
    keys = sorted(store.objects)
    assert len(keys) == 3
    del store.objects[keys[1]]  # a put that never landed
    got = await _recover(_wal(store))
    assert [r.base_offset for r in got] == [0]
    assert sorted(store.objects) == keys[:1]


async def test_trim_deletes_objects_wholly_below_the_position() -> None:
    store = MemoryObjectStore()
    wal = _wal(store)
    await wal.start()
    handles = []
    for i in range(3):
        handles.append(wal.append(1, i, 1, b"x" * 10))
        await handles[-1].done
        await asyncio.sleep(0.01)
    await wal.trim(handles[1].end_position)
    assert len(store.objects) == 1
    await wal.close()


async def test_close_fails_appends_it_could_not_store() -> None:
    store = _FlakyStore(failures=10**6)
    wal = ObjectWriteAheadLog(store, "wal/", batch_interval_ms=1, close_timeout_s=0.2)
    await wal.start()
    h = wal.append(1, 0, 1, b"x")
    await wal.close()
    assert isinstance(h.done.exception(), StorageError)


def _config(**kw: object) -> S3StreamConfig:
    base: dict[str, object] = {
        "wal_kind": "object",
        "wal_batch_interval_ms": 2,
        "upload_size_bytes": 1 << 20,
        "upload_interval_ms": 60_000,
        "log_cache_bytes": 1 << 20,
    }
    base.update(kw)
    return S3StreamConfig.model_validate(base)


async def _crash(engine: S3StreamEngine) -> None:
    """Stop as kill -9 would: no final upload, queued WAL records are lost."""
    engine._closed = True
    assert engine._uploader is not None
    engine._uploader.cancel()
    wal = engine._wal
    assert isinstance(wal, ObjectWriteAheadLog) and wal._writer is not None
    wal._writer.cancel()
    for put in list(wal._inflight):
        if put.task is not None:
            put.task.cancel()
    await asyncio.sleep(0)


async def test_a_fresh_engine_recovers_acknowledged_appends_from_the_object_wal() -> None:
    store = MemoryObjectStore()
    metadata = MemoryMetadataStore()
    engine = open_engine(_config(), metadata, store)
    await engine.start()
    s = await engine.create_stream()
    payloads = [os.urandom(5000) for _ in range(50)]
    for p in payloads:
        await s.append(p, 1)
    assert metadata.list_objects() == []  # nothing uploaded yet: all of it is in the WAL
    await _crash(engine)

    engine2 = open_engine(_config(), metadata, MemoryObjectStore(store.objects))
    await engine2.start()  # replays the WAL objects and uploads them
    s2 = await engine2.open_stream(s.stream_id)
    assert s2.confirm_offset == 50
    got = [bytes(b.payload) for b in await s2.fetch(0, 50, 1 << 30)]
    assert got == payloads
    assert not [k for k in store.objects if k.endswith(".wal")]  # trimmed after upload
    await engine2.close()


async def test_close_uploads_everything_and_leaves_no_wal_objects() -> None:
    store = MemoryObjectStore()
    metadata = MemoryMetadataStore()
    engine = open_engine(_config(), metadata, store)
    await engine.start()
    s = await engine.create_stream()
    for i in range(20):
        await s.append(b"%d" % i, 1)
    await engine.close()
    assert not [k for k in store.objects if k.endswith(".wal")]
    rec = metadata.get_stream(s.stream_id)
    assert rec is not None and rec.end_offset == 20


async def test_a_late_put_of_a_dead_epoch_is_never_replayed() -> None:
    """A crashed process's in-flight put may land after its successor has
    recovered and uploaded; the next recovery must ignore it (its offsets may
    since hold other, acknowledged records)."""
    store = MemoryObjectStore()
    metadata = MemoryMetadataStore()
    engine = open_engine(_config(), metadata, store)
    await engine.start()
    s = await engine.create_stream()
    await s.append(b"acked", 1)
    await _crash(engine)
    (old_key,) = [k for k in store.objects if k.endswith(".wal")]
    epoch = old_key[len("wal/") :].split("-")[0]
    # the unacknowledged record at offset 1, put by the dead process, not yet landed
    from ingest.s3stream.wal.codec import encode_header

    late = encode_header(s.stream_id, 1, 1, b"never acked") + b"never acked"
    late_key = f"wal/{epoch}-{len(store.objects[old_key]):020d}.wal"

    engine2 = open_engine(_config(), metadata, store)
    await engine2.start()  # recovers "acked", uploads it, trims the old epoch
    assert store.objects.get("wal/floor")
    store.objects[late_key] = late  # the straggler lands now
    s2 = await engine2.open_stream(s.stream_id)
    await s2.append(b"acked later", 1)  # offset 1, in the new epoch's WAL
    await _crash(engine2)

    engine3 = open_engine(_config(), metadata, store)
    await engine3.start()
    s3 = await engine3.open_stream(s.stream_id)
    got = [bytes(b.payload) for b in await s3.fetch(0, 2, 1 << 20)]
    assert got == [b"acked", b"acked later"]
    assert late_key not in store.objects
    await engine3.close()


async def test_close_returns_while_the_store_is_down(monkeypatch: pytest.MonkeyPatch) -> None:
    import ingest.s3stream.engine as engine_module

    monkeypatch.setattr(engine_module, "_CLOSE_WAIT_S", 0.3)
    store = _FlakyStore()
    engine = open_engine(_config(), MemoryMetadataStore(), store)
    await engine.start()
    s = await engine.create_stream()
    store.failures = 10**9  # S3 goes down
    pending = s.append(b"x", 1)
    wal = engine._wal
    assert isinstance(wal, ObjectWriteAheadLog)
    wal._close_timeout = 0.3
    await asyncio.wait_for(engine.close(), 10)
    with pytest.raises(StorageError):
        await pending  # never acknowledged
