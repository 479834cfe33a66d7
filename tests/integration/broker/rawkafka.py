"""A bare Kafka wire client for feeding the broker bad input.

Requests are built from kio entities (through ``ingest.protocol.codec``) or
from raw bytes; responses are read back with kio's readers.
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer

from ingest.protocol.codec import build, is_flexible, request_class, response_class

__all__ = ["RawClient"]


class RawClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._corr = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- framing -------------------------------------------------------------------
    def header(self, api_key: int, version: int, correlation_id: int | None = None) -> bytes:
        if correlation_id is None:
            self._corr += 1
            correlation_id = self._corr
        client = b"raw-tests"
        hdr = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client
        try:
            flexible = is_flexible(api_key, version)
        except Exception:  # noqa: BLE001 - an API or version kio does not know
            flexible = False
        return hdr + (b"\0" if flexible else b"")

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def encode(self, api_key: int, version: int, values: dict[str, Any]) -> bytes:
        entity = build(request_class(api_key, version), values)
        buf = io.BytesIO()
        entity_writer(type(entity))(buf, entity)
        return self.header(api_key, version) + buf.getvalue()

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exactly(4))[0]
        return self._recv_exactly(size)

    def read_response(self, api_key: int, version: int) -> tuple[int, Any]:
        frame = self.recv_frame()
        (corr,) = struct.unpack_from(">i", frame, 0)
        pos = 4
        if api_key != 18 and is_flexible(api_key, version):
            assert frame[pos] == 0, "tagged fields in the response header"
            pos += 1
        result = entity_reader(response_class(api_key, version))(memoryview(frame), pos)
        entity = result[0] if isinstance(result, tuple) else result
        return corr, entity

    def request(self, api_key: int, version: int, values: dict[str, Any]) -> Any:
        self.send_frame(self.encode(api_key, version, values))
        corr, entity = self.read_response(api_key, version)
        assert corr == self._corr
        return entity

    def is_closed_by_peer(self, timeout: float = 10.0) -> bool:
        """True when the broker closes the connection (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def _recv_exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            out += chunk
        return bytes(out)
