"""ReadBufferPool: buffers are reused only when nothing refers to them."""

from __future__ import annotations

import threading

from ingest.s3stream.objectstore.buffers import ReadBufferPool

MIB = 1 << 20


def test_a_buffer_is_reused_once_every_view_of_it_is_gone() -> None:
    pool = ReadBufferPool(8 * MIB, granule=MIB)
    a = pool.take(MIB - 10)
    assert a is not None and len(a) == MIB - 10
    a[:3] = b"abc"
    first = id(a.obj)
    del a
    b = pool.take(MIB)
    assert b is not None and id(b.obj) == first  # same size class, free: reused
    assert (pool.allocated, pool.reused) == (1, 1)


def test_a_buffer_with_a_live_slice_is_never_handed_out_again() -> None:
    pool = ReadBufferPool(8 * MIB, granule=MIB)
    a = pool.take(1000)
    assert a is not None
    payload = a[10:20][2:5]  # a slice of a slice, as batch payloads are
    a[12:15] = b"xyz"
    del a
    b = pool.take(1000)
    assert b is not None
    b[:] = bytes(1000)  # a reader filling its buffer
    assert bytes(payload) == b"xyz"
    assert pool.allocated == 2 and pool.reused == 0
    del payload, b
    assert pool.take(1000) is not None and pool.reused == 1


def test_a_view_of_the_buffer_object_itself_keeps_it_in_use() -> None:
    pool = ReadBufferPool(8 * MIB, granule=MIB)
    a = pool.take(1000)
    assert a is not None
    owner = a.obj  # a reference to the bytearray, not a view
    del a
    b = pool.take(1000)
    assert b is not None and b.obj is not owner
    del owner, b


def test_sizes_round_up_to_the_granule_and_the_budget_is_kept() -> None:
    pool = ReadBufferPool(3 * MIB, granule=MIB)
    views = [pool.take(MIB + 1), pool.take(10)]
    assert all(v is not None for v in views)
    assert pool.pooled_bytes == 3 * MIB  # 2 MiB + 1 MiB
    assert pool.take(10) is None  # every pooled buffer is in use: the caller reads unpooled
    assert pool.unpooled == 1
    del views


def test_free_buffers_of_other_sizes_make_room() -> None:
    pool = ReadBufferPool(3 * MIB, granule=MIB)
    small = [pool.take(10), pool.take(10), pool.take(10)]
    del small
    big = pool.take(2 * MIB)  # two free 1 MiB buffers are dropped for it
    assert big is not None and memoryview(big.obj).nbytes == 2 * MIB
    assert pool.pooled_bytes == 3 * MIB


def test_trim_drops_only_free_buffers() -> None:
    pool = ReadBufferPool(8 * MIB, granule=MIB)
    kept = pool.take(10)
    free = pool.take(10)
    del free
    assert pool.trim() == MIB
    assert pool.pooled_bytes == MIB
    assert kept is not None
    kept[:2] = b"ok"
    assert bytes(kept[:2]) == b"ok"


def test_threads_taking_at_once_never_share_a_buffer() -> None:
    pool = ReadBufferPool(64 * MIB, granule=MIB)
    held: list[memoryview] = []
    lock = threading.Lock()

    def work() -> None:
        mine = []
        for _ in range(50):
            v = pool.take(100)
            assert v is not None
            mine.append(v)
            if len(mine) > 3:
                mine.pop(0)
        with lock:
            held.extend(mine)  # kept alive until every thread is done

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    owners = [id(v.obj) for v in held]
    assert len(held) == 8 * 3 and len(set(owners)) == len(owners)
