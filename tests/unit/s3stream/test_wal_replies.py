"""Replies the file WAL's C writer sends itself once their records are
durable (``DurableReplies``): what a Produce response relies on when it
leaves from the writer thread instead of the event loop."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

import pytest

from ingest.errors import StorageError
from ingest.s3stream.wal import FileWriteAheadLog
from ingest.s3stream.wal import file as file_wal
from ingest.s3stream.wal.api import DurableReplies


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


class _Told:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []
        self.event = asyncio.Event()

    def __call__(self, sent: int, err: int) -> None:
        self.calls.append((sent, err))
        self.event.set()


@pytest.fixture
def pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    b.settimeout(10)
    yield a, b
    a.close()
    b.close()


async def test_a_reply_is_sent_once_its_records_are_durable(
    tmp_path: Path, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, client = pair
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    assert isinstance(wal, DurableReplies) and wal.native
    durable: list[BaseException | None] = []
    h = wal.append(1, 0, 1, b"record", durable.append)
    told = _Told()
    token = wal.reply_when_durable(ours.fileno(), b"response", told)
    assert token is not None and wal.replies_outstanding
    await asyncio.sleep(0)  # the writer is kicked at the end of the loop iteration
    # the writer sends it: the event loop does nothing more (it is blocked here)
    assert _recv_exactly(client, 8) == b"response"
    # the client holds the reply: the loop hears of the record at once when asked
    wal.poll_durable()
    assert durable == [None] and h.done.done()
    assert told.calls == [(8, 0)] and not wal.replies_outstanding
    assert wal.replies_sent == {"whole": 1, "partly": 0, "not": 0}
    await wal.close()
    # what was answered is in the log
    assert [r.payload for r in [x async for x in FileWriteAheadLog(tmp_path).recover()]] == [
        b"record"
    ]


async def test_a_reply_waits_for_every_record_appended_before_it(
    tmp_path: Path, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, client = pair
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    handles = [wal.append(1, i, 1, b"x" * 100_000) for i in range(20)]
    told = _Told()
    assert wal.reply_when_durable(ours.fileno(), b"after twenty", told) is not None
    await asyncio.wait_for(told.event.wait(), 10)
    assert all(h.done.done() and h.done.exception() is None for h in handles)
    assert _recv_exactly(client, 12) == b"after twenty"
    await wal.close()


async def test_no_reply_is_taken_when_everything_is_durable_already(
    tmp_path: Path, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, _ = pair
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    await wal.append(1, 0, 1, b"r").done
    assert wal.reply_when_durable(ours.fileno(), b"late", _Told()) is None
    await wal.close()


async def test_a_cancelled_reply_is_never_sent(
    tmp_path: Path, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, client = pair
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    h = wal.append(1, 0, 1, b"r")  # the writer takes it at the end of this iteration
    told = _Told()
    token = wal.reply_when_durable(ours.fileno(), b"taken back", told)
    assert token is not None
    assert wal.cancel_reply(token)
    assert not wal.cancel_reply(token)  # once
    await h.done
    await wal.close()
    client.setblocking(False)
    with pytest.raises(BlockingIOError):
        client.recv(100)
    assert told.calls == []


async def test_a_reply_on_failed_records_is_not_sent(
    tmp_path: Path, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, client = pair
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    await wal.append(1, 0, 1, b"ok").done
    readonly = os.open(tmp_path / "LOCK", os.O_RDONLY)  # the disk fails
    os.dup2(readonly, wal._fd)
    os.close(readonly)
    h = wal.append(1, 1, 1, b"lost")
    told = _Told()
    assert wal.reply_when_durable(ours.fileno(), b"must not leave", told) is not None
    with pytest.raises(StorageError):
        await h.done
    await asyncio.wait_for(told.event.wait(), 10)
    sent, err = told.calls[0]
    assert sent == 0 and err != 0
    assert wal.replies_sent == {"whole": 0, "partly": 0, "not": 1}
    client.setblocking(False)
    with pytest.raises(BlockingIOError):
        client.recv(100)
    # a failed log takes no more replies
    assert wal.reply_when_durable(ours.fileno(), b"x", _Told()) is None
    await wal.close()


async def test_what_a_full_socket_does_not_take_is_left_to_the_caller(
    tmp_path: Path, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, client = pair
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    wal.append(1, 0, 1, b"r")
    big = os.urandom(4 << 20)
    told = _Told()
    assert wal.reply_when_durable(ours.fileno(), big, told) is not None
    await asyncio.wait_for(told.event.wait(), 10)  # the writer never blocks on the socket
    sent, err = told.calls[0]
    assert 0 <= sent < len(big) and err == 0
    assert wal.replies_sent["partly"] == 1
    assert _recv_exactly(client, sent) == big[:sent]
    await wal.close()


async def test_the_python_writer_takes_no_replies(
    tmp_path: Path, pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_wal, "NATIVE", False)
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    wal.append(1, 0, 1, b"r")
    assert wal.reply_when_durable(pair[0].fileno(), b"x", _Told()) is None
    await wal.close()


async def test_replies_can_be_turned_off(
    tmp_path: Path, pair: tuple[socket.socket, socket.socket]
) -> None:
    wal = FileWriteAheadLog(tmp_path, writer_replies=False)
    await wal.start()
    assert wal.native
    wal.append(1, 0, 1, b"r")
    assert wal.reply_when_durable(pair[0].fileno(), b"x", _Told()) is None
    await wal.close()


async def test_a_sockets_replies_go_out_in_the_order_queued(
    tmp_path: Path, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, client = pair
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    told = [_Told() for _ in range(20)]
    for i in range(20):  # some share a group commit, some follow one in flight
        wal.append(1, i, 1, b"r" * 50_000)
        assert wal.reply_when_durable(ours.fileno(), b"%04d" % i, told[i], i == 0) is not None
        if i % 3 == 0:
            await asyncio.sleep(0)
    await asyncio.wait_for(told[-1].event.wait(), 10)
    assert _recv_exactly(client, 80) == b"".join(b"%04d" % i for i in range(20))
    assert all(t.calls == [(4, 0)] for t in told)
    await wal.close()


async def test_after_a_reply_the_socket_did_not_take_whole_the_later_ones_wait(
    tmp_path: Path, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, client = pair
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    wal.append(1, 0, 1, b"r")
    big, after = _Told(), _Told()
    data = os.urandom(4 << 20)
    wal.reply_when_durable(ours.fileno(), data, big)
    wal.append(1, 1, 1, b"r")
    wal.reply_when_durable(ours.fileno(), b"later", after, False)
    await asyncio.wait_for(after.event.wait(), 10)
    sent = big.calls[0][0]
    assert sent < len(data)
    assert after.calls == [(0, 0)]  # not sent: the caller writes it after the rest of the first
    assert _recv_exactly(client, sent) == data[:sent]
    # a new run (none of the caller's replies outstanding) is sent again
    wal.append(1, 2, 1, b"r")
    again = _Told()
    wal.reply_when_durable(ours.fileno(), b"again", again, True)
    await asyncio.wait_for(again.event.wait(), 10)
    assert again.calls == [(5, 0)] and _recv_exactly(client, 5) == b"again"
    await wal.close()


async def test_taking_back_a_reply_takes_back_the_later_ones_on_its_socket(
    tmp_path: Path, pair: tuple[socket.socket, socket.socket]
) -> None:
    ours, client = pair
    other_ours, other_client = socket.socketpair()
    wal = FileWriteAheadLog(tmp_path)
    await wal.start()
    h = wal.append(1, 0, 1, b"r")
    first, later, elsewhere = _Told(), _Told(), _Told()
    token = wal.reply_when_durable(ours.fileno(), b"first", first)
    assert token is not None
    assert wal.reply_when_durable(ours.fileno(), b"later", later, False) is not None
    assert wal.reply_when_durable(other_ours.fileno(), b"other", elsewhere) is not None
    assert wal.cancel_reply(token)
    await h.done
    await asyncio.wait_for(elsewhere.event.wait(), 10)
    other_client.settimeout(10)
    assert _recv_exactly(other_client, 5) == b"other"  # another socket's reply is not touched
    assert first.calls == [] and later.calls == [] and not wal.replies_outstanding
    client.setblocking(False)
    with pytest.raises(BlockingIOError):
        client.recv(100)
    await wal.close()
    other_ours.close()
    other_client.close()
