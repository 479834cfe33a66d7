"""One Kafka client connection: framing, pipelining, in-order responses.

Requests on a connection are dispatched as soon as they are framed, so a slow
request (a long-polling Fetch, a Produce waiting for fsync) does not hold the
ones behind it; responses are written strictly in request order, as Kafka
clients require.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["KafkaConnection", "Dispatch"]

log = logging.getLogger(__name__)

# dispatch(frame, connection) -> awaitable response bytes (None: no response),
# or raises ConnectionAbort to close the connection.
Dispatch = Callable[[memoryview, "KafkaConnection"], "Awaitable[bytes | None] | None"]

_SIZE = struct.Struct(">i")
_MAX_INFLIGHT = 128


class ConnectionAbort(Exception):
    """Close the connection (malformed frame, unknown API...)."""


class KafkaConnection(asyncio.Protocol):
    def __init__(
        self,
        dispatch: Dispatch,
        max_request_bytes: int,
        on_close: Callable[[KafkaConnection], None],
    ) -> None:
        self._dispatch = dispatch
        self._max = max_request_bytes
        self._on_close = on_close
        self._buf = bytearray()
        self._pos = 0
        self._pending: deque[asyncio.Future[bytes | None] | bytes | None] = deque()
        self.transport: asyncio.Transport | None = None
        self.peer: str = "?"
        self._closing = False
        self._reading_paused = False
        self._writing_paused = False

    # --- asyncio callbacks ------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}" if peer else "?"
        transport.set_write_buffer_limits(high=8 * 1024 * 1024)  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        for item in self._pending:
            if isinstance(item, asyncio.Future) and not item.done():
                item.cancel()
        self._pending.clear()
        self._on_close(self)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        while not self._closing:
            avail = len(buf) - self._pos
            if avail < 4:
                break
            (size,) = _SIZE.unpack_from(buf, self._pos)
            if size < 0 or size > self._max:
                log.warning(
                    "closing %s: request size %d outside [0, %d]", self.peer, size, self._max
                )
                self.abort()
                return
            if avail < 4 + size:
                break
            start = self._pos + 4
            frame = memoryview(bytes(buf[start : start + size]))
            self._pos = start + size
            self._handle(frame)
        if self._pos:
            if self._pos >= len(buf):
                buf.clear()
            else:
                del buf[: self._pos]
            self._pos = 0

    # --- requests --------------------------------------------------------------------
    def _handle(self, frame: memoryview) -> None:
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

    def _flush(self, _fut: object = None) -> None:
        if self.transport is None or self._closing:
            return
        out: list[bytes] = []
        while self._pending:
            head = self._pending[0]
            if not head.done():  # type: ignore[union-attr]
                break
            self._pending.popleft()
            try:
                data = head.result()  # type: ignore[union-attr]
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
        self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self._closing:
            return
        should_pause = self._writing_paused or len(self._pending) >= _MAX_INFLIGHT
        if should_pause and not self._reading_paused:
            self.transport.pause_reading()
            self._reading_paused = True
        elif not should_pause and self._reading_paused:
            self.transport.resume_reading()
            self._reading_paused = False

    def abort(self) -> None:
        self._closing = True
        if self.transport is not None:
            self.transport.abort()

    def info(self) -> dict[str, Any]:
        return {"peer": self.peer, "pending": len(self._pending)}
