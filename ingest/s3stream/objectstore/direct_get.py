"""Object GETs straight over ``http.client``, signed by botocore: the read hot path.

A catch-up read is a stream of large GETs. Through boto3 each one costs about
1.5 ms of interpreter time before the body is read (request building, event
hooks, response parsing), time that holds the GIL the other readers need. On
moto on a 2-core machine, four-parallel GETs of 8 MiB objects ran about 25 %
faster sent this way (e.g. 782 -> 978 MB/s, ``bench/s3stream_bench.py``), and
cold catch-up reads, which also parse and check what they read, gained more.

The happy path only: a ``200``/``206`` body, ``404 NoSuchKey`` and ``416``.
Anything else (another status, a redirect, a connection error or timeout)
returns ``None`` and the caller sends the request again through boto3, which
owns retries, backoff, redirects and error mapping. Answers that retrying
cannot fix (a redirect, 400, 403) three times in a row turn the direct path
off for the store, with a warning: a misconfigured region or endpoint then
costs one request per GET, not two. Requests are signed with
botocore's own SigV4 signer and the session's (refreshable) credentials, at the
URL botocore itself builds for the bucket, so addressing style and endpoint
resolution stay botocore's.

Blocking; one keep-alive connection per calling thread.
"""

from __future__ import annotations

import http.client
import logging
import os
import re
import socket
import ssl
import threading
import urllib.request
from typing import Any
from urllib.parse import quote, urlsplit

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.httpsession import get_cert_path

from ingest.s3stream.errors import ObjectNotFoundError
from ingest.s3stream.objectstore.buffers import ReadBufferPool
from ingest.s3stream.objectstore.health import ObjectStoreHealth

__all__ = ["DirectGetter"]

log = logging.getLogger(__name__)

_PROBE_KEY = "tidelake-direct-get-probe"
_CODE = re.compile(rb"<Code>([^<]*)</Code>")
_BODY_STATUSES = (200, 206)
_PERMANENT_STATUSES = (301, 302, 307, 308, 400, 403)
_PERMANENT_LIMIT = 3  # such answers in a row before the direct path turns off
_POOLED_MIN = 1 << 20


def _read_into(resp: http.client.HTTPResponse, pool: ReadBufferPool) -> bytes | memoryview:
    n = resp.length
    if n is None or n < _POOLED_MIN:
        return resp.read()
    view = pool.take(n)
    if view is None:  # the pool's buffers are all in use
        return resp.read()
    got = 0
    while got < n:
        k = resp.readinto(view[got:])
        if not k:
            raise http.client.IncompleteRead(bytes(view[:got]), n - got)
        got += k
    return view


class DirectGetter:
    """GETs of one bucket through persistent ``http.client`` connections."""

    def __init__(
        self,
        client: Any,
        credentials: Any,
        bucket: str,
        *,
        connect_timeout: float,
        read_timeout: float,
        buffer_bytes: int,
        health: ObjectStoreHealth | None = None,
    ) -> None:
        self._credentials = credentials
        self._health = health
        self.buffers = ReadBufferPool(buffer_bytes)
        self._region = client.meta.region_name or "us-east-1"
        # The URL botocore would send a GET of this bucket to (endpoint,
        # addressing style, region): presigning is local, no request is made.
        probe = urlsplit(
            client.generate_presigned_url(
                "get_object", Params={"Bucket": bucket, "Key": _PROBE_KEY}, ExpiresIn=60
            )
        )
        if not probe.path.endswith("/" + _PROBE_KEY) or not probe.hostname:
            raise ValueError(f"cannot derive the GET URL of bucket {bucket!r}")
        self._scheme = probe.scheme
        self._hostname = probe.hostname
        default_port = 443 if probe.scheme == "https" else 80
        self._port = probe.port or default_port
        host = f"[{probe.hostname}]" if ":" in probe.hostname else probe.hostname
        self._host = host if self._port == default_port else f"{host}:{self._port}"
        self._path_prefix = probe.path[: -len(_PROBE_KEY)]
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._tls: ssl.SSLContext | None = None
        if self._scheme == "https":
            # the CA bundle botocore would use: AWS_CA_BUNDLE, else certifi's
            cafile = os.environ.get("AWS_CA_BUNDLE") or get_cert_path(True)
            self._tls = ssl.create_default_context(cafile=cafile)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: set[http.client.HTTPConnection] = set()
        self.gets = 0
        self.fallbacks = 0
        self.enabled = True
        self._refusals = 0  # permanent-looking answers in a row

    @staticmethod
    def usable(client: Any, credentials: Any) -> bool:
        """Whether GETs can go direct: signed requests, and no proxy to honour."""
        if credentials is None:
            return False
        if client.meta.config.proxies:
            return False
        url = client.meta.endpoint_url or ""
        parts = urlsplit(url)
        proxies = urllib.request.getproxies()
        return not (
            parts.scheme in proxies and not urllib.request.proxy_bypass(parts.hostname or "")
        )

    def get(
        self, key: str, byte_range: str | None, *, pooled: bool = False
    ) -> bytes | memoryview | None:
        """The object's bytes (``b""`` past its end), ``None`` to fall back.

        With ``pooled``, a large body is read straight into a recycled buffer
        (:class:`~ingest.s3stream.objectstore.buffers.ReadBufferPool`) and
        returned as a memoryview of it, valid while referenced.

        Raises ``ObjectNotFoundError`` when S3 answers ``404 NoSuchKey``.
        """
        path = self._path_prefix + quote(key, safe="/~")
        headers = {"Host": self._host}
        if byte_range is not None:
            headers["Range"] = byte_range
        request = AWSRequest(
            method="GET", url=f"{self._scheme}://{self._host}{path}", headers=headers
        )
        S3SigV4Auth(self._credentials.get_frozen_credentials(), "s3", self._region).add_auth(
            request
        )
        sent = dict(request.headers.items())
        for attempt in (0, 1):
            try:
                conn, reused = self._connection()
            except OSError as e:
                self.fallbacks += 1
                self._record(type(e).__name__)
                return None
            try:
                conn.request("GET", path, headers=sent)
                resp = conn.getresponse()
                if pooled and resp.status in _BODY_STATUSES:
                    body: bytes | memoryview = _read_into(resp, self.buffers)
                else:
                    body = resp.read()
                break
            except (OSError, http.client.HTTPException) as e:
                self._drop(conn)
                if reused and attempt == 0:
                    continue  # the server closed the idle connection: once more, anew
                self.fallbacks += 1
                self._record(type(e).__name__)
                return None
        else:  # pragma: no cover - the loop breaks or returns
            return None
        if resp.will_close:
            self._drop(conn)
        if resp.status in _BODY_STATUSES:
            self.gets += 1
            self._refusals = 0
            self._record(None)
            return body
        if resp.status == 416:
            self.gets += 1
            self._record(None)
            return b""
        if resp.status == 404:
            m = _CODE.search(body)
            if m is not None and m.group(1) == b"NoSuchKey":
                self.gets += 1
                self._record(None)
                raise ObjectNotFoundError(f"NoSuchKey: {key}")
        self.fallbacks += 1
        if resp.status >= 500 or resp.status == 429:
            m = _CODE.search(body)
            self._record(
                f"{resp.status} {m.group(1).decode(errors='replace') if m else ''}".strip()
            )
        if resp.status in _PERMANENT_STATUSES:
            self._refusals += 1
            if self._refusals >= _PERMANENT_LIMIT and self.enabled:
                self.enabled = False
                m = _CODE.search(body)
                log.warning(
                    "direct S3 GETs answered %d (%s) %d times in a row; sending GETs "
                    "through boto3 from now on",
                    resp.status,
                    m.group(1).decode(errors="replace") if m else "no code",
                    self._refusals,
                )
        return None

    def _record(self, failure: str | None) -> None:
        if self._health is not None:
            self._health.attempt("GetObject", failure)

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection, and whether it served a request before."""
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn, True
        if self._tls is not None:
            conn = http.client.HTTPSConnection(
                self._hostname, self._port, timeout=self._connect_timeout, context=self._tls
            )
        else:
            conn = http.client.HTTPConnection(
                self._hostname, self._port, timeout=self._connect_timeout
            )
        try:
            conn.connect()
            assert conn.sock is not None
            conn.sock.settimeout(self._read_timeout)
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except BaseException:
            conn.close()
            raise
        self._local.conn = conn
        with self._lock:
            self._conns.add(conn)
        return conn, False

    def _drop(self, conn: http.client.HTTPConnection) -> None:
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None
        with self._lock:
            self._conns.discard(conn)
        conn.close()

    def close(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, set()
        for c in conns:
            c.close()
