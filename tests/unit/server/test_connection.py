"""KafkaConnection framing and its limits, driven through a fake transport."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from ingest.server.connection import KafkaConnection, RequestMemory, close_expired


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.paused = False
        self.aborted = False
        self.eof = False
        self.written: list[bytes] = []
        self.writes = 0  # writelines calls: what the client reads as one

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def writelines(self, data: Any) -> None:
        self.written.extend(data)
        self.writes += 1

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof = True

    def abort(self) -> None:
        self.aborted = True


class Harness:
    def __init__(self, memory: RequestMemory) -> None:
        self.frames: list[bytes] = []
        self.conn = KafkaConnection(self._dispatch, 1 << 30, lambda _c: None, memory)
        self.transport = FakeTransport()
        self.conn.connection_made(self.transport)

    def _dispatch(self, frame: memoryview, _conn: KafkaConnection) -> None:
        self.frames.append(bytes(frame))
        return None


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


async def test_frames_split_anywhere_are_reassembled() -> None:
    h = Harness(RequestMemory(1 << 20))
    data = _frame(b"a" * 10) + _frame(b"b" * 300) + _frame(b"") + _frame(b"c" * 5)
    for i in range(0, len(data), 7):
        h.conn.data_received(data[i : i + 7])
    assert h.frames == [b"a" * 10, b"b" * 300, b"", b"c" * 5]
    assert h.conn.buffered_bytes == 0


async def test_partial_frames_never_reserve_more_than_the_cap() -> None:
    memory = RequestMemory(1000)
    holders = [Harness(memory) for _ in range(5)]
    for h in holders:
        h.conn.data_received(struct.pack(">i", 400) + b"x" * 100)
    assert memory.reserved <= 1000
    assert [h.transport.paused for h in holders] == [False, False, True, True, True]
    assert sum(h.conn.buffered_bytes for h in holders) <= 2 * 400 + 3 * 100
    # A small frame that arrives whole is still served.
    other = Harness(memory)
    other.conn.data_received(_frame(b"small"))
    assert other.frames == [b"small"]
    # The first holder completes: one waiter gets its reservation and reads again.
    holders[0].conn.data_received(b"x" * 300)
    assert holders[0].frames == [b"x" * 400]
    await asyncio.sleep(0)
    assert [h.transport.paused for h in holders[1:]] == [False, False, True, True]
    assert memory.reserved == 800
    holders[2].conn.data_received(b"y" * 300)
    assert holders[2].frames == [b"x" * 100 + b"y" * 300]


async def test_a_frame_larger_than_the_cap_is_read_alone() -> None:
    memory = RequestMemory(100)
    h = Harness(memory)
    h.conn.data_received(struct.pack(">i", 500) + b"z" * 10)
    assert not h.transport.paused
    h.conn.data_received(b"z" * 490)
    assert h.frames == [b"z" * 500]
    assert memory.reserved == 0


async def test_idle_and_slow_connections_expire() -> None:
    memory = RequestMemory(1 << 20)
    idle, slow, busy = Harness(memory), Harness(memory), Harness(memory)
    slow.conn.data_received(struct.pack(">i", 100) + b"x")
    now = asyncio.get_running_loop().time()
    assert close_expired([idle.conn, slow.conn, busy.conn], now + 5, 60, 10) == 0
    busy.conn.last_active = now + 50
    assert close_expired([idle.conn, slow.conn, busy.conn], now + 20, 60, 10) == 1
    assert slow.transport.aborted
    assert close_expired([idle.conn, busy.conn], now + 61, 60, 10) == 1
    assert idle.transport.aborted and not busy.transport.aborted


async def test_drain_answers_what_is_in_flight_then_half_closes() -> None:
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[bytes | None] = loop.create_future()
    conn = KafkaConnection(lambda _f, _c: answer, 1 << 20, lambda _c: None)
    transport = FakeTransport()
    conn.connection_made(transport)
    conn.data_received(_frame(b"req"))
    conn.drain()
    conn.data_received(_frame(b"late"))  # not read any more
    assert transport.paused and not transport.eof
    answer.set_result(b"resp")
    await asyncio.sleep(0)
    assert transport.written == [b"resp"]
    assert transport.eof and not transport.paused


async def test_a_reply_delivered_early_waits_for_the_requests_before_it() -> None:
    """A request served without a task (Produce) writes its response from
    the callback that completes it, at once, but never before the responses
    owed to requests framed before it; one delivered after the connection is
    lost is dropped."""
    loop = asyncio.get_running_loop()
    slow: asyncio.Future[bytes | None] = loop.create_future()
    replies: list[asyncio.Future[bytes | None]] = []

    def dispatch(frame: memoryview, conn: KafkaConnection) -> Any:
        if bytes(frame) == b"slow":
            return slow
        replies.append(conn.open_reply())
        return None

    conn = KafkaConnection(dispatch, 1 << 20, lambda _c: None)
    transport = FakeTransport()
    conn.connection_made(transport)
    conn.data_received(_frame(b"slow") + _frame(b"eager") + _frame(b"eager"))
    conn.deliver(replies[1], b"third", None)
    conn.deliver(replies[0], b"second", None)
    await asyncio.sleep(0)
    assert transport.written == []  # the first is owed first
    slow.set_result(b"first")
    await asyncio.sleep(0)
    assert transport.written == [b"first", b"second", b"third"]
    assert transport.writes == 1
    conn.data_received(_frame(b"eager"))
    assert transport.written[-1] == b"third"
    conn.deliver(replies[2], b"fourth", None)
    assert transport.written[-1] == b"fourth"  # written at once, no loop turn in between
    conn.data_received(_frame(b"eager") + _frame(b"eager"))
    conn.deliver(replies[3], b"fifth", None)
    assert transport.written[-1] == b"fifth" and transport.writes == 3
    conn.deliver(replies[4], b"sixth", None)
    assert transport.written[-1] == b"sixth" and transport.writes == 4
    conn.data_received(_frame(b"eager"))
    conn.connection_lost(None)
    conn.deliver(replies[5], b"lost", None)
    assert transport.written[-1] == b"sixth" and replies[5].cancelled()
