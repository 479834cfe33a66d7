"""One Kafka client connection: framing, pipelining, in-order responses.

Requests on a connection are dispatched as soon as they are framed, so a slow
request (a long-polling Fetch, a Produce waiting for fsync) does not hold the
ones behind it; responses are written strictly in request order, as Kafka
clients require.

What a connection may hold of the broker's memory and time is bounded:

- Reads go into a per-connection scratch buffer (``asyncio.BufferedProtocol``);
  a frame that arrives whole in one read is copied out of it and dispatched.
  A frame that spans reads must first reserve its declared size from the
  listener's :class:`RequestMemory`; it then gets a buffer of that size, and
  the rest of it is read straight into that buffer (a large Produce is never
  copied on its way in). While a reservation cannot be granted the
  connection stops reading (it holds at most the rest of one read), and
  reads again when other frames complete. Bytes buffered for partial frames
  across all connections therefore stay within ``max_buffered_request_bytes``
  (a single frame larger than the cap is admitted only when nothing else is
  reserved).
- :func:`close_expired` closes connections whose started frame has not
  completed within the request read timeout, and connections with nothing
  in flight and no traffic for ``connections.max.idle.ms``.
- :meth:`KafkaConnection.drain` (shutdown) stops reading requests, lets those
  in flight finish and their responses go out, then half-closes.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from ingest.server.lent_reply import Lender

if TYPE_CHECKING:
    from ingest.s3stream.api import StreamEngine
    from ingest.security.sasl import SecuritySession

__all__ = [
    "KafkaConnection",
    "Dispatch",
    "RequestMemory",
    "ConnectionAbort",
    "ProduceOrder",
    "close_expired",
]

log = logging.getLogger(__name__)

# dispatch(frame, connection) -> awaitable response bytes (None: no response),
# or raises ConnectionAbort to close the connection.
Dispatch = Callable[[memoryview, "KafkaConnection"], "Awaitable[bytes | None] | None"]

_SIZE = struct.Struct(">i")
_MAX_INFLIGHT = 128


class ConnectionAbort(Exception):
    """Close the connection (malformed frame, unknown API...)."""


class ProduceOrder(asyncio.Lock):
    """What keeps a connection's Produce appends in arrival order.

    A request that may wait before its appends are issued (a quota's
    throttle; in a cluster, a partition moving here) runs in a task and waits
    under the lock. ``tasks`` counts the connection's Produce requests on
    that path, not finished yet: while there are any, a request framed later
    must take the same path (behind the lock) rather than issue its appends
    at once, or it would overtake them.
    """

    def __init__(self) -> None:
        super().__init__()
        self.tasks = 0

    def task_done(self, _task: object = None) -> None:
        self.tasks -= 1


class RequestMemory:
    """Bytes reserved for frames being read, across the connections of a listener.

    A reservation is granted when it fits under ``limit``, or when nothing is
    reserved at all (so that one frame larger than the limit can still be
    read, alone). Connections refused wait, not reading, and are offered the
    memory again, oldest first, whenever some is released.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.reserved = 0
        self._waiting: deque[KafkaConnection] = deque()

    def try_reserve(self, nbytes: int) -> bool:
        if self.reserved and self.reserved + nbytes > self.limit:
            return False
        self.reserved += nbytes
        return True

    def release(self, nbytes: int) -> None:
        self.reserved -= nbytes
        if self._waiting:
            self._wake()

    def wait(self, conn: KafkaConnection) -> None:
        self._waiting.append(conn)

    def forget(self, conn: KafkaConnection) -> None:
        try:
            self._waiting.remove(conn)
        except ValueError:
            pass

    def _wake(self) -> None:
        # Every waiter that now fits, in arrival order; a large frame that does
        # not fit yet does not hold back the small ones behind it.
        for conn in list(self._waiting):
            if conn.retry_admission():
                self._waiting.remove(conn)


_SCRATCH_BYTES = 256 * 1024  # one read's worth of small frames


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(
        self,
        dispatch: Dispatch,
        max_request_bytes: int,
        on_close: Callable[[KafkaConnection], None],
        memory: RequestMemory | None = None,
        session: SecuritySession | None = None,
        on_open: Callable[[KafkaConnection], None] | None = None,
    ) -> None:
        self._dispatch = dispatch
        # called once the transport is up (after TLS's handshake): a connection
        # whose handshake fails is never made, and never lost, so whoever
        # tracks connections must add them here, not when the protocol is built
        self._on_open = on_open
        # TLS principal, SASL state: what the connection may send before it authenticated
        self.session = session
        self._max = max_request_bytes
        self._on_close = on_close
        self._memory = memory if memory is not None else RequestMemory(2 * max_request_bytes)
        # framing state
        self._header = bytearray()  # a size prefix split across reads
        self._frame: bytearray | None = None  # a frame split across reads, at full size
        self._fill = 0  # bytes of ``_frame`` received
        self._need = 0  # bytes the frame in ``_frame`` still needs
        self._scratch: bytearray | None = None  # what reads go into between frames
        self._direct = False  # the last get_buffer() handed out ``_frame``
        self._reserved = 0  # bytes reserved from ``_memory`` for it
        self._held: bytes | None = None  # unread input while waiting for memory
        self._held_size = 0  # the declared size waiting for a reservation
        self._pending: deque[asyncio.Future[bytes | None]] = deque()
        self.transport: asyncio.Transport | None = None
        self.peer: str = "?"
        self._loop = asyncio.get_running_loop()
        self.last_active = self._loop.time()
        self.frame_started: float | None = None  # when the current frame began
        self._paused_at: float | None = None
        self._closing = False
        self._draining = False
        self._reading_paused = False
        self._writing_paused = False
        self._waiting_memory = False
        self.closed: asyncio.Future[None] = self._loop.create_future()
        # Produce requests of this connection issue their appends in arrival
        # order even when one waits for a partition moving here (a cluster):
        # the idempotent sequences of pipelined requests must not overtake.
        self.produce_order = ProduceOrder()
        self._lender = Lender()  # a response the WAL's writer sends (see lent_reply)

    # --- asyncio callbacks ------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}" if peer else "?"
        transport.set_write_buffer_limits(high=8 * 1024 * 1024)  # type: ignore[attr-defined]
        self._lender.attach(transport)  # type: ignore[arg-type]
        self.last_active = self._loop.time()
        if self.session is not None:
            self.session.on_connected(transport)
        if self._on_open is not None:
            self._on_open(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        for item in self._pending:
            if not item.done():
                item.cancel()
        self._pending.clear()
        self._lender.lost()
        self._drop_partial()
        if not self.closed.done():
            self.closed.set_result(None)
        self._on_close(self)

    def eof_received(self) -> bool | None:
        return None  # close our side too (the transport closes once writes are flushed)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        """Where the next read goes: straight into a started frame's own
        buffer (exactly what it still needs), else the scratch buffer."""
        self._direct = self._frame is not None and self._need > 0
        if self._direct:
            assert self._frame is not None
            return memoryview(self._frame)[self._fill :]
        if self._scratch is None:
            self._scratch = bytearray(_SCRATCH_BYTES)
        return memoryview(self._scratch)

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = self._loop.time()
        if self._draining or self._closing:
            return  # shutting down: requests not yet read are not answered
        if not self._direct:
            assert self._scratch is not None
            self._consume(memoryview(self._scratch)[:nbytes], 0, owned=False)
            return
        self._fill += nbytes
        self._need -= nbytes
        if not self._need:
            self._complete_frame()

    def data_received(self, data: bytes) -> None:
        """Bytes that are the caller's to keep (tests feed frames this way):
        a whole frame is handled in place."""
        self.last_active = self._loop.time()
        if self._draining or self._closing:
            return  # shutting down: requests not yet read are not answered
        self._consume(memoryview(data), 0, owned=True)

    # --- framing ---------------------------------------------------------------------
    def _complete_frame(self) -> None:
        frame, self._frame = self._frame, None
        assert frame is not None
        self._fill = 0
        self._finish_frame()
        self._handle(memoryview(frame).toreadonly())

    def _consume(self, view: memoryview, pos: int, *, owned: bool) -> None:
        """Frame what ``view`` holds from ``pos``. Unless ``owned`` (bytes no
        one will overwrite), a frame is copied out before it is handled."""
        end = len(view)
        while pos < end and not self._closing and not self._draining:
            if self._frame is not None:  # continue a frame that spans reads
                take = min(self._need, end - pos)
                self._frame[self._fill : self._fill + take] = view[pos : pos + take]
                pos += take
                self._fill += take
                self._need -= take
                if self._need:
                    return
                self._complete_frame()
                continue
            if self._header or end - pos < 4:  # a size prefix split across reads
                take = min(4 - len(self._header), end - pos)
                self._header += view[pos : pos + take]
                pos += take
                if len(self._header) < 4:
                    self._start_clock()
                    return
                (size,) = _SIZE.unpack(self._header)
                self._header.clear()
            else:
                (size,) = _SIZE.unpack_from(view, pos)
                pos += 4
            if size < 0 or size > self._max:
                log.warning(
                    "closing %s: request size %d outside [0, %d]", self.peer, size, self._max
                )
                self.abort()
                return
            if end - pos >= size:  # the whole frame is here
                whole = view[pos : pos + size] if owned else memoryview(bytes(view[pos : pos + size]))
                pos += size
                self.frame_started = None
                self._handle(whole)
                continue
            # The frame spans reads: it needs memory reserved for it first.
            if not self._memory.try_reserve(size):
                self._held = bytes(view[pos:])
                self._held_size = size
                self._waiting_memory = True
                self._memory.wait(self)
                self.frame_started = None
                self._update_reading()
                return
            self._begin_frame(size)
            self._start_partial(size, view[pos:])
            return

    def _start_partial(self, size: int, head: memoryview | bytes) -> None:
        """A frame of ``size`` bytes of which ``head`` arrived: its buffer,
        which the next reads fill in place."""
        self._frame = bytearray(size)
        self._frame[: len(head)] = head
        self._fill = len(head)
        self._need = size - len(head)

    def _begin_frame(self, size: int) -> None:
        self._reserved = size
        self.frame_started = self._loop.time()

    def _start_clock(self) -> None:
        if self.frame_started is None:
            self.frame_started = self._loop.time()

    def _finish_frame(self) -> None:
        self.frame_started = None
        reserved, self._reserved = self._reserved, 0
        if reserved:
            self._memory.release(reserved)

    def retry_admission(self) -> bool:
        """Called by :class:`RequestMemory` when memory was released: True
        once this connection's waiting frame got its reservation."""
        if not self._waiting_memory or self._closing:
            return True
        if not self._memory.try_reserve(self._held_size):
            return False
        self._waiting_memory = False
        held, self._held = self._held or b"", None
        size, self._held_size = self._held_size, 0
        self._begin_frame(size)
        self._start_partial(size, held)
        # Resume from the event loop, not from inside another connection's callback.
        self._loop.call_soon(self._update_reading)
        return True

    def _drop_partial(self) -> None:
        self._frame = None
        self._fill = 0
        self._header.clear()
        self._held = None
        if self._waiting_memory:
            self._waiting_memory = False
            self._memory.forget(self)
        self._finish_frame()

    # --- requests --------------------------------------------------------------------
    def _handle(self, frame: memoryview) -> None:
        if self.session is not None:
            # before SASL authentication, or a session expired without
            # re-authentication (KIP-368): the request is refused, the connection closed
            refused = self.session.refusal(int.from_bytes(frame[0:2], "big", signed=True))
            if refused is not None:
                log.info("closing %s: %s", self.peer, refused)
                self.abort()
                return
        try:
            result = self._dispatch(frame, self)
        except ConnectionAbort as exc:
            log.info("closing %s: %s", self.peer, exc)
            self.abort()
            return
        except Exception:
            log.exception("closing %s: request failed", self.peer)
            self.abort()
            return
        if result is None:
            return  # no response (acks=0)
        fut = asyncio.ensure_future(result)
        self._pending.append(fut)
        fut.add_done_callback(self._flush)
        self._update_reading()

    def open_reply(self) -> asyncio.Future[bytes | None]:
        """A response's place in the connection's order, for a request served
        without a task: :meth:`deliver` fills it and writes what is ready at
        once (no loop iteration between the result and the write)."""
        reply: asyncio.Future[bytes | None] = self._loop.create_future()
        self._pending.append(reply)
        self._update_reading()
        return reply

    def deliver(
        self, reply: asyncio.Future[bytes | None], data: bytes | None, error: BaseException | None
    ) -> None:
        """The response of ``reply`` (or the error that closes the connection)."""
        if reply.done():
            return  # the connection was lost, or the WAL's writer sent it
        if self._closing:
            reply.cancel()
            return
        if self._lender.intercept(reply, data, error):
            return  # the WAL's writer is sending the reply it was lent
        self._settle(reply, data, error)

    def lend(self, reply: asyncio.Future[bytes | None], data: bytes, engine: StreamEngine) -> bool:
        """Have ``engine``'s WAL writer send ``data``, the response of
        ``reply``, as soon as the appends issued so far are durable (see
        :mod:`~ingest.server.lent_reply`); only for a reply owed right after
        those lent already.
        :meth:`deliver` is still called with the handler's answer: it goes
        out only if the lent reply did not."""
        if not self.may_lend(reply):
            return False
        return self._lender.lend(reply, data, engine, self._settle)

    @property
    def lending(self) -> bool:
        """Replies of this connection are with the WAL's writer now."""
        return bool(self._lender.lent)

    def may_lend(self, reply: asyncio.Future[bytes | None]) -> bool:
        """Whether :meth:`lend` may take ``reply`` now (before its response is built)."""
        # the replies lent already are the first owed (see lent_reply): this
        # one may follow them when nothing else is owed before it
        return (
            not self._closing
            and not self._draining
            and len(self._pending) == len(self._lender.lent) + 1
            and self._pending[-1] is reply
            and self._lender.may_lend()
        )

    def _settle(
        self, reply: asyncio.Future[bytes | None], data: bytes | None, error: BaseException | None
    ) -> None:
        if reply.done():
            return
        if error is None:
            reply.set_result(data)
        else:
            reply.set_exception(error)
        # written now, not coalesced with others completing later in this
        # loop iteration: a flush deferred to the next iteration waits behind
        # the work queued there (other requests' stamping and WAL appends),
        # which put 0.5 ms on the p99 of five 1 MiB requests pipelined
        self._flush()

    def _flush(self, _fut: object = None) -> None:
        if self.transport is None or self._closing:
            return
        out: list[bytes] = []
        while self._pending:
            head = self._pending[0]
            if not head.done():
                break
            self._pending.popleft()
            try:
                data = head.result()
            except asyncio.CancelledError:
                continue
            except ConnectionAbort as exc:
                log.info("closing %s: %s", self.peer, exc)
                self.abort()
                return
            except Exception:
                log.exception("closing %s: handler failed", self.peer)
                self.abort()
                return
            if data is not None:
                out.append(data)
        if out:
            self.transport.writelines(out)
            self.last_active = self._loop.time()
        if self.session is not None and self.session.close_after_response:
            # failed authentication: the error goes out, then, after Kafka's
            # connection.failed.authentication.delay.ms, the connection closes
            self._closing = True
            self._loop.call_later(self.session.close_delay_s, self.transport.close)
            return
        if self._draining and not self._pending:
            self._finish_drain()
            return
        self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self._closing:
            return
        should_pause = (
            self._writing_paused
            or self._waiting_memory
            or (self._draining and bool(self._pending))
            or len(self._pending) >= _MAX_INFLIGHT
        )
        now = self._loop.time()
        if should_pause and not self._reading_paused:
            self.transport.pause_reading()
            self._reading_paused = True
            self._paused_at = now
        elif not should_pause and self._reading_paused:
            self.transport.resume_reading()
            self._reading_paused = False
            # Time spent held back by the broker does not count against the client.
            if self.frame_started is not None and self._paused_at is not None:
                self.frame_started += now - self._paused_at
            self._paused_at = None

    # --- shutdown ----------------------------------------------------------------------
    def drain(self) -> None:
        """Stop reading requests; answer those in flight, then half-close.

        Input not yet framed is dropped unanswered (the client sees the
        connection close after the responses it is owed and retries the rest
        elsewhere). ``closed`` resolves when the connection is gone.
        """
        if self._draining or self._closing:
            return
        self._draining = True
        self._drop_partial()
        if self._pending:
            self._update_reading()
        else:
            self._finish_drain()

    def _finish_drain(self) -> None:
        transport = self.transport
        if transport is None or self._closing:
            return
        # Send FIN after the responses and keep reading (discarding) until the
        # client closes: closing with unread input would reset the connection,
        # and a reset can destroy responses the client has not read yet.
        if transport.can_write_eof():
            transport.write_eof()
        else:
            transport.close()
            return
        if self._reading_paused:
            transport.resume_reading()
            self._reading_paused = False

    def abort(self) -> None:
        self._closing = True
        if self.transport is not None:
            self.transport.abort()

    # --- housekeeping --------------------------------------------------------------
    def expired(self, now: float, idle_s: float, read_timeout_s: float) -> str | None:
        """Why this connection should be closed now, or None."""
        if self._closing or self._draining:
            return None
        if self.frame_started is not None:
            if read_timeout_s > 0 and not self._reading_paused:
                if now - self.frame_started > read_timeout_s:
                    return f"request not completed within {read_timeout_s:g} s"
            return None
        if idle_s > 0 and not self._pending and not self._waiting_memory:
            if now - self.last_active > idle_s:
                return f"idle for more than {idle_s:g} s"
        return None

    @property
    def buffered_bytes(self) -> int:
        """Bytes this connection holds of requests not yet framed."""
        return (
            len(self._header)
            + (self._fill if self._frame is not None else 0)
            + (len(self._held) if self._held is not None else 0)
        )

    def info(self) -> dict[str, Any]:
        return {"peer": self.peer, "pending": len(self._pending), "buffered": self.buffered_bytes}


def close_expired(
    connections: Iterable[KafkaConnection], now: float, idle_s: float, read_timeout_s: float
) -> int:
    """Close every connection that is idle or slow beyond its limits; returns how many."""
    closed = 0
    for conn in list(connections):
        reason = conn.expired(now, idle_s, read_timeout_s)
        if reason is not None:
            log.info("closing %s: %s", conn.peer, reason)
            conn.abort()
            closed += 1
    return closed
