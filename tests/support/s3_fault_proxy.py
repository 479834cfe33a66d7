"""A flaky, slow S3 in front of a real one: an HTTP proxy on 127.0.0.1 that
fails a fraction of requests with ``503 SlowDown`` and delays another fraction.

    proxy = S3FaultProxy("http://127.0.0.1:5000", fail=0.2, slow=0.2, delay=0.2).start()
    ... point the S3 client at proxy.endpoint ...
    proxy.set_faults(fail=0.0, slow=0.0)  # healthy again
    proxy.close()

Each request draws once from a seeded generator: below ``fail`` it is answered
``503 SlowDown`` (after its body was read, as S3 does; nothing is forwarded),
below ``fail + slow`` it is forwarded after ``delay`` seconds, else forwarded
at once. Counters (``requests``, ``failed``, ``delayed``, and ``failed_by_method``)
say what was injected. Upstream connections are kept alive, one per proxy
thread.
"""

from __future__ import annotations

import http.client
import random
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = ["S3FaultProxy"]

_SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message>"
    b"<RequestId>injected</RequestId></Error>"
)
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "proxy-connection",
}


class S3FaultProxy:
    def __init__(
        self,
        upstream: str,
        *,
        fail: float = 0.0,
        slow: float = 0.0,
        delay: float = 0.2,
        seed: int = 14,
    ) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.fail = fail
        self.slow = slow
        self.delay = delay
        self.requests = 0
        self.failed = 0
        self.delayed = 0
        self.failed_by_method: Counter[str] = Counter()
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="s3-fault-proxy", daemon=True
        )

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def set_faults(
        self, *, fail: float | None = None, slow: float | None = None, delay: float | None = None
    ) -> None:
        with self._lock:
            if fail is not None:
                self.fail = fail
            if slow is not None:
                self.slow = slow
            if delay is not None:
                self.delay = delay

    def start(self) -> S3FaultProxy:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> S3FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the request path, in the server's threads --------------------------------
    def _draw(self, method: str) -> tuple[str, float]:
        with self._lock:
            self.requests += 1
            x = self._random.random()
            if x < self.fail:
                self.failed += 1
                self.failed_by_method[method] += 1
                return "fail", 0.0
            if x < self.fail + self.slow:
                self.delayed += 1
                return "slow", self.delay
            return "ok", 0.0

    def _forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        for attempt in (0, 1):
            conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
            reused = conn is not None
            if conn is None:
                conn = http.client.HTTPConnection(*self.upstream, timeout=60)
                self._local.conn = conn
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                if resp.will_close:
                    conn.close()
                    self._local.conn = None
                return resp.status, resp.getheaders(), data
            except (OSError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                if not reused or attempt:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = bytearray()
                    while True:
                        line = self.rfile.readline()
                        size = int(line.split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline().strip():
                                pass  # trailers
                            return bytes(out)
                        out += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _reply(self, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
                self.send_response(status)
                length = str(len(data))
                for k, v in headers:
                    if k.lower() == "content-length" and self.command == "HEAD":
                        length = v  # the object's size, not the (empty) body's
                    elif k.lower() not in _HOP_BY_HOP:
                        self.send_header(k, v)
                self.send_header("Content-Length", length)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _handle(self) -> None:
                body = self._body()
                verdict, delay = proxy._draw(self.command)
                if verdict == "fail":
                    self._reply(503, [("Content-Type", "application/xml")], _SLOW_DOWN)
                    return
                if delay:
                    time.sleep(delay)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                headers["Content-Length"] = str(len(body))
                try:
                    status, resp_headers, data = proxy._forward(
                        self.command, self.path, headers, body
                    )
                except (OSError, http.client.HTTPException):
                    self.close_connection = True
                    return
                self._reply(status, resp_headers, data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        return Handler
