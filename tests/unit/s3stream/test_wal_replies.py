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
