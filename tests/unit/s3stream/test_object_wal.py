"""The object-store WAL: batching, ordered acknowledgement, retries, recovery, trim,
fencing (a recovery takes the log over from a writer that may still be running);
and the engine on it (recovery on a fresh engine with no local state)."""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from ingest.errors import StorageError
from ingest.metadata import MemoryMetadataStore
from ingest.s3stream import S3StreamConfig, S3StreamEngine, open_engine
from ingest.s3stream.errors import ObjectExistsError, StreamFencedError, WalFencedError
from ingest.s3stream.objectstore import FileObjectStore, MemoryObjectStore, ObjectStore
from ingest.s3stream.objectstore.retry import WalPutPolicy
from ingest.s3stream.wal import ObjectWriteAheadLog, WalRecord
from ingest.s3stream.wal.codec import HEADER, encode_header

_FENCE_MAGIC = b"TIDELAKE-WAL-FENCE\n"


def _data_keys(objects: dict[str, bytes]) -> list[str]:
    """The WAL objects that hold records (not fences)."""
    return sorted(
        k for k, v in objects.items() if k.endswith(".wal") and not v.startswith(_FENCE_MAGIC)
    )


def _fence_keys(objects: dict[str, bytes]) -> list[str]:
    return sorted(
        k for k, v in objects.items() if k.endswith(".wal") and v.startswith(_FENCE_MAGIC)
    )


def _at(start: int) -> str:
    """The end of the key of a WAL object at ``start`` (whatever the epoch)."""
    return f"-{start:020d}.wal"


class _FlakyStore(MemoryObjectStore):
    """Fails the next ``failures`` puts; delays puts of keys ending in a ``slow`` key."""

    def __init__(self, objects: dict[str, bytes] | None = None, failures: int = 0) -> None:
        super().__init__(objects)
        self.failures = failures
        self.slow: dict[str, float] = {}
        self.puts: list[str] = []

    async def put(
        self, key: str, data: bytes | bytearray | memoryview, *, if_absent: bool = False
    ) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise StorageError("injected 500")
        await asyncio.sleep(next((d for k, d in self.slow.items() if key.endswith(k)), 0.0))
        self.puts.append(key)
        await super().put(key, data, if_absent=if_absent)


class _HookStore(MemoryObjectStore):
    """Runs a hook (once) before a put or get of a key ending in its suffix, sets
    ``landed[suffix]`` once such a put is stored, and gives other tasks a turn
    before every operation, as a remote store would."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        super().__init__(objects)
        self.before_put: dict[str, Callable[[], Awaitable[object]]] = {}
        self.before_get: dict[str, Callable[[], Awaitable[object]]] = {}
        self.landed: dict[str, asyncio.Event] = {}

    @staticmethod
    async def _hook(hooks: dict[str, Callable[[], Awaitable[object]]], key: str) -> None:
        await asyncio.sleep(0)
        for suffix in [s for s in hooks if key.endswith(s)]:
            await hooks.pop(suffix)()

    async def put(
        self, key: str, data: bytes | bytearray | memoryview, *, if_absent: bool = False
    ) -> None:
        await self._hook(self.before_put, key)
        await super().put(key, data, if_absent=if_absent)
        for suffix in [s for s in self.landed if key.endswith(s)]:
            self.landed[suffix].set()

    async def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        await self._hook(self.before_get, key)
        return await super().get(key, start, end)


async def _recover(wal: ObjectWriteAheadLog) -> list[WalRecord]:
    return [r async for r in wal.recover()]


def _offsets(records: list[WalRecord]) -> list[int]:
    return [r.base_offset for r in records]


def _wal(store: ObjectStore, **kw: object) -> ObjectWriteAheadLog:
    return ObjectWriteAheadLog(store, "wal/", batch_interval_ms=2, retry_initial_s=0.01, **kw)  # type: ignore[arg-type]


async def test_appends_are_batched_into_few_objects_and_read_back_in_order() -> None:
    store = MemoryObjectStore()
    wal = _wal(store)
    await wal.start()
    told: list[int] = []
    handles = [
        wal.append(7, i, 1, os.urandom(1000), lambda e, i=i: told.append(i if e is None else -1))
        for i in range(300)
    ]
    await asyncio.gather(*(h.done for h in handles))
    await asyncio.sleep(0)
    assert told == list(range(300))  # every listener, once, in order, with no error
    assert 1 <= wal.puts < 30
    await wal.close()
    wal2 = _wal(MemoryObjectStore(store.objects))
    got = await _recover(wal2)
    assert [(r.stream_id, r.base_offset) for r in got] == [(7, i) for i in range(300)]
    assert [r.position for r in got] == [h.position for h in handles]
    assert wal2.next_position == handles[-1].end_position


async def test_acknowledgements_follow_position_order_when_puts_finish_out_of_order() -> None:
    store = _FlakyStore()
    store.slow[_at(0)] = 0.2
    wal = _wal(store, max_in_flight=4)
    await wal.start()
    first = wal.append(1, 0, 1, b"a" * 100)
    await asyncio.sleep(0.05)
    second = wal.append(1, 1, 1, b"b" * 100)
    order: list[str] = []
    first.done.add_done_callback(lambda _f: order.append("first"))
    second.done.add_done_callback(lambda _f: order.append("second"))
    await asyncio.gather(first.done, second.done)
    assert [k for k in store.puts if k.endswith(".wal")][0].endswith(_at(HEADER.size + 100))
    assert order == ["first", "second"]
    await wal.close()


async def test_failed_puts_are_retried_until_they_land() -> None:
    store = _FlakyStore()
    wal = _wal(store)
    await wal.start()
    store.failures = 5
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
    keys = _data_keys(store.objects)
    assert len(keys) == 3
    del store.objects[keys[1]]  # a put that never landed
    got = await _recover(_wal(store))
    assert [r.base_offset for r in got] == [0]
    assert _data_keys(store.objects) == keys[:1]
    assert _fence_keys(store.objects) == [keys[1]]  # its writer can never put it now


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
    assert len(_data_keys(store.objects)) == 1
    await wal.close()


async def test_close_fails_appends_it_could_not_store() -> None:
    store = _FlakyStore()
    wal = ObjectWriteAheadLog(store, "wal/", batch_interval_ms=1, close_timeout_s=0.2)
    await wal.start()
    store.failures = 10**6
    told: list[BaseException | None] = []
    h = wal.append(1, 0, 1, b"x", told.append)
    await wal.close()
    assert isinstance(h.done.exception(), StorageError)
    await asyncio.sleep(0)
    assert told == [h.done.exception()]  # its listener hears the same, once


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
    assert not _data_keys(store.objects)  # trimmed after upload
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
    (old_key,) = _data_keys(store.objects)
    epoch = old_key[len("wal/") :].split("-")[0]
    # unacknowledged records at offset 1 and 2, put by the dead process, not yet landed
    at = len(store.objects[old_key])
    late = encode_header(s.stream_id, 1, 1, b"never acked", at) + b"never acked"
    late_key = f"wal/{epoch}-{at:020d}.wal"
    later = encode_header(s.stream_id, 2, 1, b"never acked", at + len(late)) + b"never acked"
    later_key = f"wal/{epoch}-{at + len(late):020d}.wal"

    engine2 = open_engine(_config(), metadata, store)
    await engine2.start()  # recovers "acked", fences the old epoch, uploads, trims it
    assert store.objects.get("wal/floor")
    with pytest.raises(ObjectExistsError):  # the fence is there
        await store.put(late_key, late, if_absent=True)
    await store.put(later_key, later, if_absent=True)  # the straggler after it lands now
    s2 = await engine2.open_stream(s.stream_id)
    await s2.append(b"acked later", 1)  # offset 1, in the new epoch's WAL
    await _crash(engine2)

    engine3 = open_engine(_config(), metadata, store)
    await engine3.start()
    s3 = await engine3.open_stream(s.stream_id)
    got = [bytes(b.payload) for b in await s3.fetch(0, 2, 1 << 20)]
    assert got == [b"acked", b"acked later"]
    assert later_key not in store.objects
    assert store.objects[late_key].startswith(_FENCE_MAGIC)  # fences stay
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


# --- fencing: a recovery takes the log over from a writer that may still run -------
_R = HEADER.size + 2  # the size of a record with a 2-byte payload


def _rec(i: int) -> bytes:
    return b"r%d" % i


async def test_a_recovery_fences_a_live_writer_and_recovers_all_it_acknowledged() -> None:
    objects: dict[str, bytes] = {}
    a = _wal(_HookStore(objects))  # the zombie: keeps appending while b recovers
    await a.start()
    acked: list[int] = []
    failed: list[BaseException] = []
    twenty = asyncio.Event()

    def outcome(i: int) -> Callable[[asyncio.Future[None]], None]:
        def done(f: asyncio.Future[None]) -> None:
            error = f.exception()
            (failed.append(error) if error is not None else acked.append(i))
            if len(acked) >= 20:
                twenty.set()

        return done

    async def produce() -> None:
        for i in itertools.count():
            try:
                a.append(1, i, 1, b"%d" % i).done.add_done_callback(outcome(i))
            except WalFencedError:
                return
            await asyncio.sleep(0.001)

    producer = asyncio.create_task(produce())
    await asyncio.wait_for(twenty.wait(), 10)
    b = _wal(_HookStore(objects))
    got = await _recover(b)
    await asyncio.wait_for(producer, 10)  # a refuses appends once a put met the fence
    await asyncio.sleep(0.05)
    assert a.fenced
    assert acked == list(range(len(acked)))  # in order
    assert set(acked) <= set(_offsets(got))  # nothing acknowledged is lost
    assert failed and all(isinstance(e, WalFencedError) for e in failed)
    with pytest.raises(WalFencedError):
        a.append(1, 10**6, 1, b"late")


async def test_a_put_that_lands_just_before_the_fence_is_recovered() -> None:
    objects: dict[str, bytes] = {}
    a_store, b_store = _HookStore(objects), _HookStore(objects)
    a = _wal(a_store)
    await a.start()
    await a.append(1, 0, 1, _rec(0)).done
    gate = asyncio.Event()
    a_store.before_put[_at(_R)] = gate.wait  # a's next object is slow to land ...
    landed = a_store.landed[_at(_R)] = asyncio.Event()
    second = a.append(1, 1, 1, _rec(1))

    async def a_lands_first() -> None:  # ... and lands just before b's fence
        gate.set()
        await landed.wait()

    b_store.before_put[_at(_R)] = a_lands_first
    b = _wal(b_store)
    assert _offsets(await _recover(b)) == [0, 1]
    await second.done  # acknowledged, and b has it
    with pytest.raises(WalFencedError):
        await a.append(1, 2, 1, _rec(2)).done  # b's fence is where it goes
    assert a.fenced


async def test_a_later_recovery_stops_at_the_fence_and_keeps_it() -> None:
    objects: dict[str, bytes] = {}
    a = _wal(MemoryObjectStore(objects))
    await a.start()
    for i in range(2):
        await a.append(1, i, 1, _rec(i)).done
    b = _wal(MemoryObjectStore(objects))
    assert _offsets(await _recover(b)) == [0, 1]
    (fence,) = _fence_keys(objects)
    assert fence.endswith(_at(2 * _R))
    body = objects[fence]
    # a put a had in flight lands after the fence: never acknowledged, never replayed
    straggler = fence.replace(_at(2 * _R), _at(3 * _R))
    objects[straggler] = encode_header(1, 3, 1, _rec(3), 3 * _R) + _rec(3)

    c = _wal(MemoryObjectStore(objects))
    assert _offsets(await _recover(c)) == [0, 1]
    assert objects[fence] == body
    assert straggler not in objects
    with pytest.raises(WalFencedError):
        await a.append(1, 2, 1, _rec(2)).done
    await b.start()  # c fenced b too, before b put anything
    with pytest.raises(WalFencedError):
        await b.append(1, 2, 1, _rec(2)).done


async def test_a_fenced_writer_on_a_file_store_acknowledges_nothing_more(tmp_path: Path) -> None:
    stores = [FileObjectStore(tmp_path) for _ in range(3)]
    a = _wal(stores[0])
    await a.start()
    for i in range(3):
        await a.append(1, i, 1, _rec(i)).done
    assert _offsets(await _recover(_wal(stores[1]))) == [0, 1, 2]
    with pytest.raises(WalFencedError):
        await a.append(1, 3, 1, _rec(3)).done
    assert _offsets(await _recover(_wal(stores[2]))) == [0, 1, 2]
    bodies = [await stores[2].get(o.key) for o in await stores[2].list("wal/")]
    fences = [b for b in bodies if b.startswith(_FENCE_MAGIC)]
    assert len(fences) == 2  # a's (kept by the third recovery) and the second log's
    await a.close()
    for s in stores:
        await s.close()


async def test_an_idle_writer_that_put_nothing_is_fenced() -> None:
    objects: dict[str, bytes] = {}
    a = _wal(MemoryObjectStore(objects))
    await a.start()  # on an empty prefix: nothing put yet but the floor and a's first mark
    assert await _recover(_wal(MemoryObjectStore(objects))) == []
    with pytest.raises(WalFencedError):
        await a.append(1, 0, 1, _rec(0)).done


async def test_an_idle_writer_that_trimmed_all_its_objects_is_fenced() -> None:
    objects: dict[str, bytes] = {}
    a = _wal(MemoryObjectStore(objects))
    await a.start()
    for i in range(2):
        await a.append(1, i, 1, _rec(i)).done
    await a.trim(a.next_position)  # uploaded: no WAL object left, its mark says where
    assert not _data_keys(objects)
    assert await _recover(_wal(MemoryObjectStore(objects))) == []
    with pytest.raises(WalFencedError):
        await a.append(1, 2, 1, _rec(2)).done


async def test_a_writer_that_trims_past_the_fence_key_during_recovery_is_still_fenced() -> None:
    objects: dict[str, bytes] = {}
    a_store, b_store = _HookStore(objects), _HookStore(objects)
    a = _wal(a_store)
    await a.start()
    await a.append(1, 0, 1, _rec(0)).done

    async def a_moves_on() -> None:
        # before b's fence lands at a's next key, a puts and acknowledges two more
        # objects and trims (uploaded) everything up to its newest one
        for i in (1, 2):
            await a.append(1, i, 1, _rec(i)).done
        await a.trim(2 * _R)

    b_store.before_put[_at(_R)] = a_moves_on  # b's fence lands on a trimmed key
    b = _wal(b_store)
    assert _offsets(await _recover(b)) == [0, 2]  # record 1 was uploaded and trimmed
    with pytest.raises(WalFencedError):
        await a.append(1, 3, 1, _rec(3)).done
    # the next recovery ignores b's fence below a's trim mark
    assert _offsets(await _recover(_wal(MemoryObjectStore(objects)))) == [2]


async def test_a_first_object_still_in_flight_is_never_acknowledged_after_recovery() -> None:
    objects: dict[str, bytes] = {}
    a_store = _HookStore(objects)
    a = _wal(a_store, put_policy=WalPutPolicy(hedge_after_s=None))  # (a hedge would land)
    await a.start()
    gate = asyncio.Event()
    a_store.before_put[_at(0)] = gate.wait
    landed = a_store.landed[_at(_R)] = asyncio.Event()
    first = a.append(1, 0, 1, _rec(0))  # its put hangs
    await asyncio.sleep(0.02)
    second = a.append(1, 1, 1, _rec(1))  # its put lands
    await asyncio.wait_for(landed.wait(), 5)
    assert await _recover(_wal(MemoryObjectStore(objects))) == []
    assert not _data_keys(objects)  # the object after the gap was never acknowledged
    gate.set()
    for h in (first, second):
        with pytest.raises(WalFencedError):
            await h.done


@pytest.mark.parametrize("with_data", [False, True], ids=["empty", "with-data"])
async def test_concurrent_recoveries_leave_exactly_one_writer(with_data: bool) -> None:
    objects: dict[str, bytes] = {}
    if with_data:
        a = _wal(MemoryObjectStore(objects))
        await a.start()
        await a.append(1, 0, 1, _rec(0)).done
    logs = [_wal(_HookStore(objects)) for _ in range(2)]
    results = await asyncio.gather(*(_recover(w) for w in logs), return_exceptions=True)
    acked: list[list[WalRecord]] = []
    for wal, result in zip(logs, results, strict=True):
        if isinstance(result, BaseException):
            assert isinstance(result, WalFencedError)
            continue
        await wal.start()
        try:
            await wal.append(1, 1, 1, _rec(1)).done
        except WalFencedError:
            continue
        acked.append(result)
    assert len(acked) == 1
    assert _offsets(acked[0]) == ([0] if with_data else [])


async def test_a_put_retried_after_its_first_attempt_landed_is_acknowledged() -> None:
    class LostAnswer(MemoryObjectStore):
        lost = 0

        async def put(
            self, key: str, data: bytes | bytearray | memoryview, *, if_absent: bool = False
        ) -> None:
            await super().put(key, data, if_absent=if_absent)
            if key.endswith(".wal") and not self.lost:
                self.lost += 1
                raise StorageError("timed out reading the answer")  # but it landed

    wal = _wal(LostAnswer())
    await wal.start()
    await asyncio.wait_for(wal.append(1, 0, 1, _rec(0)).done, 5)  # ObjectExistsError: its own
    await asyncio.wait_for(wal.append(1, 1, 1, _rec(1)).done, 5)
    assert wal.put_retries == 1 and not wal.fenced
    await wal.close()


async def test_a_recovery_skips_objects_trimmed_while_it_reads_them() -> None:
    objects: dict[str, bytes] = {}
    b_store = _HookStore(objects)
    a = _wal(MemoryObjectStore(objects))
    await a.start()
    for i in range(3):
        await a.append(1, i, 1, _rec(i)).done
    b_store.before_get[_at(0)] = lambda: a.trim(2 * _R)  # a uploads and trims 0 and 1
    assert _offsets(await _recover(_wal(b_store))) == [2]
    with pytest.raises(WalFencedError):
        await a.append(1, 3, 1, _rec(3)).done


@pytest.mark.parametrize("with_data", [False, True], ids=["empty", "with-data"])
async def test_a_writer_recovered_before_its_first_mark_is_fenced(with_data: bool) -> None:
    """Until its first trim mark lands, a new epoch has no key of its own: a
    recovery then finds it through the floor it created or the fences naming it."""
    objects: dict[str, bytes] = {}
    if with_data:
        x = _wal(MemoryObjectStore(objects))
        await x.start()
        await x.append(1, 0, 1, _rec(0)).done
    recovered: list[list[WalRecord]] = []

    async def b_recovers() -> None:
        recovered.append(await _recover(_wal(MemoryObjectStore(objects))))

    a_store = _HookStore(objects)
    a_store.before_put[f"-{0:020d}.trim"] = b_recovers  # a's first mark
    a = _wal(a_store)
    await a.start()
    assert _offsets(recovered[0]) == ([0] if with_data else [])
    with pytest.raises(WalFencedError):
        await a.append(1, 1, 1, _rec(1)).done


async def test_an_engine_whose_wal_another_engine_recovered_stops_writing() -> None:
    """Broker A is superseded by B on the same WAL prefix: A's next append fails, and
    A neither uploads nor commits objects any more (B owns that data now), while B
    serves everything A acknowledged."""
    store = MemoryObjectStore()
    metadata = MemoryMetadataStore()
    a = open_engine(_config(), metadata, store)
    await a.start()
    s = await a.create_stream()
    acked = [os.urandom(3000) for _ in range(20)]
    for p in acked:
        await s.append(p, 1)
    b = open_engine(_config(), metadata, MemoryObjectStore(store.objects))
    await b.start()  # recovers A's WAL objects and fences A
    objects_before = {o.object_id for o in metadata.list_objects()}
    with pytest.raises(StreamFencedError):
        await s.append(b"after the fence", 1)
    with pytest.raises(StreamFencedError):
        await asyncio.wait_for(a.flush(), 5)  # refuses at once, no retry loop
    assert {o.object_id for o in metadata.list_objects()} == objects_before
    await a.close()
    assert {o.object_id for o in metadata.list_objects()} == objects_before
    s2 = await b.open_stream(s.stream_id)
    assert s2.confirm_offset == len(acked)
    got = [bytes(x.payload) for x in await s2.fetch(0, len(acked), 1 << 30)]
    assert got == acked
    await b.close()
