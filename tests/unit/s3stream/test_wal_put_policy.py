"""The object WAL's put retry policy: short capped waits instead of the store
client's backoff of seconds, one attempt per store call, and a hedged second
put that keeps the create-only fencing intact."""

from __future__ import annotations

import asyncio
import random

import pytest

from ingest.errors import StorageError
from ingest.s3stream.errors import WalFencedError
from ingest.s3stream.objectstore import MemoryObjectStore, ObjectStore
from ingest.s3stream.objectstore.retry import WalPutPolicy, single_attempt
from ingest.s3stream.objectstore.s3 import S3ObjectStore
from ingest.s3stream.wal import ObjectWriteAheadLog

_FENCE_MAGIC = b"TIDELAKE-WAL-FENCE\n"


class _FailingStore(MemoryObjectStore):
    """Fails the next ``failures`` WAL object puts; makes one attempt per call
    (``without_retries`` returns a view that counts its own puts)."""

    def __init__(self, failures: int = 0) -> None:
        super().__init__()
        self.failures = failures
        self.wal_puts = 0
        self.view: _FailingStore | None = None

    def without_retries(self) -> ObjectStore:
        if self.view is None:
            self.view = _FailingStore(self.failures)
            self.view.objects = self.objects  # the same objects
            self.failures = 0
        return self.view

    async def put(
        self, key: str, data: bytes | bytearray | memoryview, *, if_absent: bool = False
    ) -> None:
        if key.endswith(".wal"):
            self.wal_puts += 1
            if self.failures > 0:
                self.failures -= 1
                raise StorageError("injected 503 SlowDown")
        await super().put(key, data, if_absent=if_absent)


class _HangingStore(MemoryObjectStore):
    """The first put of every WAL object key hangs until ``release`` is set
    (a request stuck in a slow server); later puts of it go through.
    ``before_hedge`` runs when the second put of a key starts."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.seen: dict[str, int] = {}
        self.cancelled = 0
        self.before_hedge: dict[str, bytes] = {}  # key -> object put there first

    async def put(
        self, key: str, data: bytes | bytearray | memoryview, *, if_absent: bool = False
    ) -> None:
        n = self.seen[key] = self.seen.get(key, 0) + 1
        if key.endswith(".wal") and n == 1 and data[: len(_FENCE_MAGIC)] != _FENCE_MAGIC:
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        elif n == 2 and key in self.before_hedge:
            await super().put(key, self.before_hedge.pop(key), if_absent=True)
        await super().put(key, data, if_absent=if_absent)


def test_the_schedule_retries_at_once_then_within_250_ms_then_backs_off() -> None:
    policy = WalPutPolicy()
    schedule = policy.schedule(random.Random(1))
    fast = [schedule.next_delay(0.5) for _ in range(6)]
    assert fast[0] == 0.0
    assert 0.05 <= fast[1] <= 0.1
    assert 0.1 <= fast[2] <= 0.2
    assert all(0.125 <= d <= 0.25 for d in fast[3:])
    # the store keeps failing past fast_for_s: exponential, up to slow_max_s
    slow = [schedule.next_delay(policy.fast_for_s + 1) for _ in range(8)]
    assert 0.5 * policy.slow_initial_s <= slow[0] <= 1.5 * policy.slow_initial_s
    assert slow[-1] >= 0.5 * policy.slow_max_s
    assert max(slow) <= 1.5 * policy.slow_max_s


def test_the_earlier_policy_is_the_store_backoff_from_100_ms() -> None:
    policy = WalPutPolicy.store_backoff()
    assert policy.store_retries and policy.hedge_after_s is None
    schedule = policy.schedule(random.Random(2))
    delays = [schedule.next_delay(0.0) for _ in range(3)]
    assert 0.05 <= delays[0] <= 0.15 and 0.1 <= delays[1] <= 0.3 and 0.2 <= delays[2] <= 0.6


@pytest.mark.parametrize("failures", [1, 4, 9])
async def test_a_failing_put_is_retried_on_the_short_schedule_through_the_single_attempt_store(
    failures: int,
) -> None:
    store = _FailingStore(failures)
    wal = ObjectWriteAheadLog(store, "wal/", batch_interval_ms=1)
    waits: list[float] = []

    async def sleep(delay: float) -> None:
        waits.append(delay)

    wal._sleep = sleep  # type: ignore[assignment]
    await wal.start()
    handle = wal.append(1, 0, 1, b"x" * 100)
    await asyncio.wait_for(handle.done, 10)
    assert wal.put_retries == failures
    assert store.view is not None and store.view.wal_puts == failures + 1
    assert store.wal_puts == 0  # WAL puts never went through the retrying store
    assert waits[0] == 0.0 and all(w <= 0.25 for w in waits)
    assert len(waits) == failures
    await wal.close()


async def test_an_unanswered_put_is_hedged_and_the_append_acknowledged() -> None:
    store = _HangingStore()
    policy = WalPutPolicy(hedge_after_s=0.01)
    wal = ObjectWriteAheadLog(store, "wal/", batch_interval_ms=1, put_policy=policy)
    await wal.start()
    handles = [wal.append(1, i, 1, b"r%d" % i) for i in range(3)]
    await asyncio.wait_for(asyncio.gather(*(h.done for h in handles)), 10)
    assert wal.put_hedges >= 1
    assert store.cancelled == wal.put_hedges  # the stuck first puts were dropped
    await wal.close()
    # a later recovery reads every acknowledged record back
    again = ObjectWriteAheadLog(MemoryObjectStore(store.objects), "wal/")
    got = [(r.base_offset, bytes(r.payload)) async for r in again.recover()]
    assert got == [(i, b"r%d" % i) for i in range(3)]


async def test_a_hedged_put_that_meets_a_fence_fences_the_log() -> None:
    store = _HangingStore()
    policy = WalPutPolicy(hedge_after_s=0.01)
    wal = ObjectWriteAheadLog(store, "wal/", batch_interval_ms=1, put_policy=policy)
    await wal.start()
    # a successor's fence lands at the key while the first put hangs
    key = wal._key(wal.next_position)
    store.before_hedge[key] = _FENCE_MAGIC + b"%020d %s\n" % (1 << 62, b"0" * 16)
    handle = wal.append(1, 0, 1, b"never acknowledged")
    with pytest.raises(WalFencedError):
        await asyncio.wait_for(handle.done, 10)
    assert wal.fenced
    with pytest.raises(WalFencedError):
        wal.append(1, 1, 1, b"refused")
    await wal.close()


def test_the_s3_store_without_retries_makes_one_attempt_and_shares_the_rest() -> None:
    store = S3ObjectStore(
        "bucket",
        "prefix",
        endpoint_url="http://127.0.0.1:9",
        region="us-east-1",
        access_key_id="test",
        secret_access_key="test",
        path_style=True,
        max_attempts=5,
    )
    view = single_attempt(store)
    assert isinstance(view, S3ObjectStore) and view is not store
    assert view is single_attempt(store)  # one view per store
    assert view._client.meta.config.retries["total_max_attempts"] == 1
    assert store._client.meta.config.retries["total_max_attempts"] == 6  # 5 retries
    assert view._executor is store._executor and view.health is store.health
    assert view._full("k") == store._full("k") == "prefix/k"
    asyncio.run(view.close())  # closes its client only
    assert not store._executor._shutdown
    asyncio.run(store.close())


def test_a_store_that_does_not_retry_on_its_own_is_used_as_it_is() -> None:
    store = MemoryObjectStore()
    assert single_attempt(store) is store
