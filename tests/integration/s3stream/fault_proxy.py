"""A small HTTP proxy between an S3 client and moto that injects faults.

``mode`` (settable at any time): ``"ok"`` forwards; ``"error"`` answers 500
InternalError; ``"slow"`` sleeps ``delay`` seconds then forwards; ``"drop"``
closes the connection without an answer; ``"mixed"`` cycles through the three
(or through the modes given to ``cycle``, which may include ``"ok"``).
"""

from __future__ import annotations

import http.client
import itertools
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

__all__ = ["FaultProxy"]

_ERROR = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>'
    b"<Message>injected</Message></Error>"
)


class FaultProxy:
    def __init__(self, upstream: str, delay: float = 3.0) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.mode = "ok"
        self.delay = delay
        self.faults = 0
        self.requests = 0
        self._cycle = itertools.cycle(["error", "slow", "drop"])
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = bytearray()
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline().strip():
                                pass
                            return bytes(out)
                        out += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _handle(self) -> None:
                body = self._body()
                with proxy._lock:
                    proxy.requests += 1
                    mode = proxy.mode
                    if mode == "mixed":
                        mode = next(proxy._cycle)
                    if mode != "ok":
                        proxy.faults += 1
                if mode == "error":
                    self.send_response(500)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(_ERROR)))
                    self.end_headers()
                    self.wfile.write(_ERROR)
                    return
                if mode == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if mode == "slow":
                    time.sleep(proxy.delay)
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() != "transfer-encoding"
                }
                headers["Content-Length"] = str(len(body))
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def cycle(self, modes: list[str]) -> None:
        """Make ``"mixed"`` cycle through ``modes`` from now on."""
        with self._lock:
            self._cycle = itertools.cycle(modes)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
