"""A response that the WAL's writer thread sends itself, once the records it
answers are durable (a connection lends it its socket for that one reply).

A Produce response is known as soon as the request's appends are issued;
only their fsync stands between it and the client. Handed to the stream
engine (:meth:`~ingest.s3stream.api.StreamEngine.reply_when_durable`), the
file WAL's writer sends it right after the fdatasync, instead of waking the
event loop to run the completion chain and write it: measured with perf
trace on the paced request, 100-130 us from the writer's wake-up of the
loop to the loop's send.

The rules that keep the connection's byte stream whole:

- a reply is lent only when every reply the connection owes before it is
  lent too (nothing else pending before it, nothing in the transport's
  buffer), over a plain TCP socket (TLS transports encrypt in the loop);
- while replies are lent, nothing else is written (they are the first the
  connection owes, and replies go out in order); the writer sends a
  socket's replies in order, one thread at a time, and once one did not go
  out whole it sends none of the later ones (the loop writes them, after
  the rest of that one);
- the writer sends on its own duplicate of the socket's fd, which the
  connection closes only once the writer is done with it (or the reply was
  taken back), so the fd number is never reused under a send;
- when the writer reports, the reply is settled: all sent (nothing more to
  write), some sent (the loop writes the rest), none sent (the records
  failed, or the socket did: the response the handler builds then is
  written as usual);
- if the handler's own answer comes first (a timeout, say), the lent reply
  is taken back if it still waits, with every later one (their answers go
  out from the loop, in order); once it is being sent, it stands: the
  records are durable, and that is what it says.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingest.s3stream.api import StreamEngine

__all__ = ["LentReply", "Lender", "Settle"]

# settle(reply, data, error): resolve a connection's reply, write what is ready
Settle = Callable[["asyncio.Future[bytes | None]", "bytes | None", "BaseException | None"], None]


class LentReply:
    __slots__ = ("reply", "data", "engine", "token", "answer")

    def __init__(self, reply: asyncio.Future[bytes | None], data: bytes, engine: StreamEngine):
        self.reply = reply
        self.data = data
        self.engine = engine
        self.token = -1
        # the handler's own answer, when it came while the writer was sending
        self.answer: tuple[bytes | None, BaseException | None] | None = None


class Lender:
    """A connection's lent replies (oldest first: always the first replies it
    owes) and the fd the WAL's writer sends them on."""

    __slots__ = ("_transport", "_fd", "lent", "_lost")

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._fd = -1
        self.lent: deque[LentReply] = deque()  # with the writer, in the order owed
        self._lost = False

    def attach(self, transport: asyncio.Transport) -> None:
        """The connection's transport: replies are lent only over plain TCP."""
        plain = (
            transport.get_extra_info("sslcontext") is None
            and transport.get_extra_info("ssl_object") is None
        )
        self._transport = transport if plain else None

    def lend(
        self,
        reply: asyncio.Future[bytes | None],
        data: bytes,
        engine: StreamEngine,
        settle: Settle,
    ) -> bool:
        """Hand ``data``, the response of ``reply`` (owed right after the
        replies lent already), to ``engine`` to send once the appends so far
        are durable. False when it cannot be lent: the handler's answer goes
        out as usual."""
        transport = self._transport
        if transport is None or not self.may_lend():
            return False
        fd = self._send_fd(transport)
        if fd < 0:
            return False
        lent = LentReply(reply, data, engine)

        def sent(nbytes: int, err: int) -> None:
            self._sent(lent, nbytes, err, settle)

        token = engine.reply_when_durable(fd, data, sent, not self.lent)
        if token is None:
            return False
        lent.token = token
        self.lent.append(lent)
        return True

    def may_lend(self) -> bool:
        """Nothing written by the loop waits in the transport."""
        transport = self._transport
        return (
            not self._lost
            and transport is not None
            and not transport.is_closing()
            and not transport.get_write_buffer_size()
        )

    def intercept(
        self, reply: asyncio.Future[bytes | None], data: bytes | None, error: BaseException | None
    ) -> bool:
        """The handler's answer for ``reply``: True when the lent reply stands
        for it (the writer is sending it: its report settles ``reply``);
        False when ``reply`` is not lent, or was taken back, and the answer
        goes out as usual. Taking one back takes back the later ones too
        (the writer must not send them before the loop writes this one):
        their answers go out as usual, in order."""
        k = next((i for i, lent in enumerate(self.lent) if lent.reply is reply), None)
        if k is None:
            return False
        lent = self.lent[k]
        if not lent.engine.cancel_reply(lent.token):
            lent.answer = (data, error)
            return True
        self._drop_from(k)
        return False

    def _drop_from(self, k: int) -> None:
        """Lent replies k... were taken back: they are the loop's to write."""
        while len(self.lent) > k:
            later = self.lent.pop()
            if later.answer is not None and not later.reply.done():
                self._settle_taken_back(later)

    def _settle_taken_back(self, lent: LentReply) -> None:
        data, error = lent.answer or (None, None)
        if error is None:
            lent.reply.set_result(data)
        else:
            lent.reply.set_exception(error)

    def _sent(self, lent: LentReply, nbytes: int, err: int, settle: Settle) -> None:
        try:
            self.lent.remove(lent)
        except ValueError:  # taken back meanwhile (cannot be: it was being sent)
            pass
        if self._lost:
            if not self.lent:
                self._close_fd()
            return
        reply = lent.reply
        if reply.done():
            return
        if nbytes >= len(lent.data):
            settle(reply, None, None)
        elif nbytes > 0 or not err:  # the socket's buffer was full: the loop writes the rest
            settle(reply, lent.data[nbytes:], None)
        elif lent.answer is not None:  # not sent (the records or the socket failed)
            settle(reply, *lent.answer)
        # else not sent, and the handler's answer goes out as usual when it comes

    def lost(self) -> None:
        """The connection is gone: take the lent replies back, or shut the
        socket so that the peer is not kept waiting for the writer."""
        self._lost = True
        for k, lent in enumerate(self.lent):
            if lent.engine.cancel_reply(lent.token):
                while len(self.lent) > k:
                    self.lent.pop()
                break
        if self.lent:  # being sent: the fd is closed on the writer's last report
            try:
                sock = socket.socket(fileno=self._fd)
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                finally:
                    sock.detach()
            except OSError:
                pass
            return
        self._close_fd()

    def _send_fd(self, transport: asyncio.Transport) -> int:
        if self._fd < 0:
            sock = transport.get_extra_info("socket")
            if sock is None:
                self._transport = None
                return -1
            try:
                self._fd = os.dup(sock.fileno())
            except OSError:
                self._transport = None
                return -1
        return self._fd

    def _close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
