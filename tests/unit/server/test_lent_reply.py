"""A connection's reply lent to the WAL's writer (``ingest.server.lent_reply``):
the rules that keep the connection's byte stream whole, against an engine
double that records what it was handed."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingest.server.dispatcher import Dispatcher
from ingest.server.lent_reply import Lender
from tests.unit.server.test_produce_order import _Conn as _OrderConn
from tests.unit.server.test_produce_order import _frame, single_topic_broker


class _Transport:
    def __init__(self, sock: socket.socket, tls: bool = False, buffered: int = 0) -> None:
        self.sock = sock
        self.tls = tls
        self.buffered = buffered
        self.closing = False

    def get_extra_info(self, name: str) -> Any:
        if name == "socket":
            return self.sock
        if name in ("sslcontext", "ssl_object"):
            return object() if self.tls else None
        return None

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return self.buffered


class _Engine:
    def __init__(self, takes: bool = True) -> None:
        self.takes = takes
        self.handed: list[tuple[int, bytes]] = []
        self.on_sent: Any = None
        self.listeners: list[Any] = []
        self.firsts: list[bool] = []
        self.cancellable = True
        self.cancelled: list[int] = []

    def reply_when_durable(
        self, fd: int, data: bytes, on_sent: Any, first: bool = True
    ) -> int | None:
        if not self.takes:
            return None
        self.handed.append((fd, data))
        self.firsts.append(first)
        self.on_sent = on_sent
        self.listeners.append(on_sent)
        return 6 + len(self.handed)  # 7, 8, ...

    def cancel_reply(self, token: int) -> bool:
        if self.cancellable:
            self.cancelled.append(token)
        return self.cancellable


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


class _Conn:
    """What a connection does with a settled reply: records it."""

    def __init__(self) -> None:
        self.settled: list[tuple[bytes | None, BaseException | None]] = []

    def settle(self, reply: asyncio.Future[bytes | None], data: bytes | None,
               error: BaseException | None) -> None:  # fmt: skip
        self.settled.append((data, error))
        reply.set_result(data)


def _lent(pair: tuple[socket.socket, socket.socket], engine: _Engine) -> tuple[
    Lender, asyncio.Future[bytes | None], _Conn
]:  # fmt: skip
    lender = Lender()
    lender.attach(_Transport(pair[0]))  # type: ignore[arg-type]
    reply: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
    conn = _Conn()
    assert lender.lend(reply, b"response", engine, conn.settle)  # type: ignore[arg-type]
    return lender, reply, conn


def _fd_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


async def test_a_reply_sent_whole_settles_with_nothing_left_to_write(pair: Any) -> None:
    engine = _Engine()
    lender, reply, conn = _lent(pair, engine)
    [(fd, data)] = engine.handed
    assert data == b"response" and fd != pair[0].fileno()  # its own duplicate of the socket
    engine.on_sent(len(data), 0)
    assert conn.settled == [(None, None)] and not lender.lent
    # the handler's answer afterwards is not this lender's any more
    assert not lender.intercept(reply, b"answer", None)


async def test_what_the_socket_did_not_take_is_written_by_the_loop(pair: Any) -> None:
    engine = _Engine()
    _, _, conn = _lent(pair, engine)
    engine.on_sent(3, 0)
    assert conn.settled == [(b"ponse", None)]


async def test_a_full_socket_leaves_the_whole_reply_to_the_loop(pair: Any) -> None:
    engine = _Engine()
    _, _, conn = _lent(pair, engine)
    engine.on_sent(0, 0)
    assert conn.settled == [(b"response", None)]


async def test_an_unsent_reply_leaves_the_answer_to_the_handler(pair: Any) -> None:
    engine = _Engine()
    lender, reply, conn = _lent(pair, engine)
    engine.on_sent(0, 5)  # the records failed (EIO)
    assert conn.settled == [] and not reply.done() and not lender.lent
    assert not lender.intercept(reply, b"error response", None)  # written as usual


async def test_an_answer_first_takes_back_a_waiting_reply(pair: Any) -> None:
    engine = _Engine()
    lender, reply, conn = _lent(pair, engine)
    assert not lender.intercept(reply, b"timed out", None)  # taken back: goes out as usual
    assert engine.cancelled == [7] and not lender.lent


async def test_an_answer_while_the_writer_sends_waits_for_its_report(pair: Any) -> None:
    engine = _Engine()
    engine.cancellable = False
    lender, reply, conn = _lent(pair, engine)
    assert lender.intercept(reply, b"timed out", None)
    assert conn.settled == []
    engine.on_sent(8, 0)  # it went out: the records are durable, and it says so
    assert conn.settled == [(None, None)]


async def test_an_answer_while_sending_goes_out_if_the_send_failed(pair: Any) -> None:
    engine = _Engine()
    engine.cancellable = False
    lender, reply, conn = _lent(pair, engine)
    assert lender.intercept(reply, b"error response", None)
    engine.on_sent(0, 32)
    assert conn.settled == [(b"error response", None)]


async def test_replies_lent_one_after_another_go_out_in_order(pair: Any) -> None:
    engine = _Engine()
    lender, first, conn = _lent(pair, engine)
    loop = asyncio.get_running_loop()
    second: asyncio.Future[bytes | None] = loop.create_future()
    third: asyncio.Future[bytes | None] = loop.create_future()
    assert lender.lend(second, b"next", engine, conn.settle)  # type: ignore[arg-type]
    assert lender.lend(third, b"last", engine, conn.settle)  # type: ignore[arg-type]
    # only the first of a run lifts the writer's stop on the socket
    assert engine.firsts == [True, False, False]
    assert [lent.reply for lent in lender.lent] == [first, second, third]
    engine.listeners[0](8, 0)
    engine.listeners[1](4, 0)
    engine.listeners[2](0, 0)  # behind one the socket did not take whole: the loop writes it
    assert conn.settled == [(None, None), (None, None), (b"last", None)]
    assert not lender.lent
    fourth: asyncio.Future[bytes | None] = loop.create_future()
    assert lender.lend(fourth, b"again", engine, conn.settle)  # type: ignore[arg-type]
    assert engine.firsts[-1] is True


async def test_taking_back_a_reply_takes_back_the_later_ones(pair: Any) -> None:
    engine = _Engine()
    lender, first, conn = _lent(pair, engine)
    loop = asyncio.get_running_loop()
    second: asyncio.Future[bytes | None] = loop.create_future()
    third: asyncio.Future[bytes | None] = loop.create_future()
    assert lender.lend(second, b"next", engine, conn.settle)  # type: ignore[arg-type]
    assert lender.lend(third, b"last", engine, conn.settle)  # type: ignore[arg-type]
    assert not lender.intercept(second, b"timed out", None)  # goes out from the loop
    assert engine.cancelled == [8]
    assert [lent.reply for lent in lender.lent] == [first]  # the third went with it
    assert not lender.intercept(third, b"its answer", None)  # the loop's, as usual


@pytest.mark.parametrize(
    "transport",
    ["tls", "buffered", "closing"],
)
async def test_no_reply_is_lent_where_the_loop_must_write(pair: Any, transport: str) -> None:
    t = _Transport(pair[0], tls=transport == "tls", buffered=10 if transport == "buffered" else 0)
    t.closing = transport == "closing"
    lender = Lender()
    lender.attach(t)  # type: ignore[arg-type]
    reply: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
    engine = _Engine()
    assert not lender.lend(reply, b"x", engine, _Conn().settle)  # type: ignore[arg-type]
    assert engine.handed == []


async def test_an_engine_that_cannot_send_lends_nothing(pair: Any) -> None:
    lender = Lender()
    lender.attach(_Transport(pair[0]))  # type: ignore[arg-type]
    reply: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
    assert not lender.lend(reply, b"x", _Engine(takes=False), _Conn().settle)  # type: ignore[arg-type]
    assert not lender.lent


async def test_a_lost_connection_takes_the_reply_back_and_closes_the_duplicate(pair: Any) -> None:
    engine = _Engine()
    lender, _, _ = _lent(pair, engine)
    [(fd, _)] = engine.handed
    lender.lost()
    assert engine.cancelled == [7] and not _fd_open(fd)


async def test_a_lost_connection_keeps_the_duplicate_until_the_writer_is_done(pair: Any) -> None:
    engine = _Engine()
    engine.cancellable = False
    lender, reply, conn = _lent(pair, engine)
    [(fd, _)] = engine.handed
    lender.lost()
    assert _fd_open(fd)  # the writer may be sending on it
    # and the peer is told the connection is over now, not after the send
    pair[1].settimeout(5)
    assert pair[1].recv(10) == b""
    engine.on_sent(0, 32)
    assert not _fd_open(fd) and conn.settled == []


async def test_requests_but_produce_hear_of_durable_records_first(tmp_path: Path) -> None:
    """A client may hold a Produce response the WAL's writer sent before the
    loop heard that its records are durable; the dispatcher has the engine
    hear of them before it serves any other request (a Fetch, a ListOffsets)
    so that a read finds them."""
    async with single_topic_broker(tmp_path) as broker:
        polls: list[int] = []
        broker.engine.poll_durable = lambda: polls.append(1)  # type: ignore[method-assign]
        dispatcher = Dispatcher(broker)
        client = b"test"
        api_versions = struct.pack(">hhih", 18, 0, 1, len(client)) + client
        await dispatcher(memoryview(api_versions), _OrderConn())  # type: ignore[arg-type]
        assert polls == [1]
        result = dispatcher(memoryview(_frame(2, 0)), _OrderConn())  # type: ignore[arg-type]
        if result is not None:
            await result
        assert polls == [1]  # a Produce reads nothing it must find
