"""A minimal idempotent acks=all producer over the raw Kafka protocol that
announces its rack in ``client.id`` and sends each partition's batches to the
broker :func:`ingest.zone_router.routed_leader` names for it, the broker
Metadata names as leader to a rack-tagged client. It reads Metadata as a
client that announces nothing, so it knows the real leaders (which tests and
the bench compare the routed broker with).

Like a Kafka producer it keeps one sequence per partition, retries a batch
with the same sequence after a retriable error or a broken connection (after
re-reading Metadata), and records the offset each batch was acknowledged at.
Any non-retriable error is raised.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from ingest.cluster.view import BrokerEndpoint
from ingest.protocol.codec import build, decode_response, encode_request, request_class
from ingest.protocol.errors import ErrorCode
from ingest.protocol.records import build_batch
from ingest.zone_router import routed_leader

__all__ = ["RoutedProducer", "Sent"]

_PRODUCE, _PRODUCE_V = 0, 9
_METADATA, _METADATA_V = 3, 9
_INIT_PID, _INIT_PID_V = 22, 1


@dataclass
class Sent:
    partition: int
    values: list[bytes]
    offset: int  # the base offset the producer was told
    latency_s: float  # of the attempt that was acknowledged
    via: int  # node id the acknowledged attempt was sent to
    retries: int


@dataclass
class _Conn:
    sock: socket.socket
    corr: int = 0


@dataclass
class RoutedProducer:
    bootstrap: list[tuple[str, int]]
    topic: str
    rack: str | None  # None: announce no rack (go to the leaders)
    client_name: str = "zr-test"
    timeout_ms: int = 10_000
    retry_for_s: float = 60.0
    errors: list[tuple[int, str]] = field(default_factory=list)  # retriable ones seen
    _brokers: list[BrokerEndpoint] = field(default_factory=list)
    _leaders: dict[int, int] = field(default_factory=dict)
    _conns: dict[int, _Conn] = field(default_factory=dict)
    _seq: dict[int, int] = field(default_factory=dict)
    _pid: tuple[int, int] = (-1, -1)

    @property
    def client_id(self) -> str:
        return (
            self.client_name
            if self.rack is None
            else f"{self.client_name};tidelake_rack={self.rack}"
        )

    def start(self) -> None:
        self.refresh()
        init = self._call_any(
            _INIT_PID, _INIT_PID_V, {"transactional_id": None, "transaction_timeout": 60_000}
        )
        assert init.error_code == ErrorCode.none, init
        self._pid = (int(init.producer_id), int(init.producer_epoch))

    def close(self) -> None:
        for c in self._conns.values():
            c.sock.close()
        self._conns.clear()

    # --- metadata ---------------------------------------------------------------------
    def refresh(self) -> None:
        md = self._call_any(
            _METADATA,
            _METADATA_V,
            {"topics": [{"name": self.topic}], "allow_auto_topic_creation": False},
            self.client_name,  # announcing no rack: the real leaders
        )
        self._brokers = [
            BrokerEndpoint(int(b.node_id), b.host, int(b.port), b.rack) for b in md.brokers
        ]
        (t,) = md.topics
        self._leaders = {int(p.partition_index): int(p.leader_id) for p in t.partitions}

    def target(self, partition: int) -> int:
        """The node this producer sends ``partition`` to."""
        leader = self._leaders.get(partition, -1)
        return routed_leader(self.topic, partition, self.rack or "", leader, self._brokers)

    def leader(self, partition: int) -> int:
        return self._leaders.get(partition, -1)

    # --- produce ----------------------------------------------------------------------
    def send(self, partition: int, values: list[bytes]) -> Sent:
        """Produce one batch of ``values`` to ``partition``; retried until it is
        acknowledged (``retry_for_s`` at most)."""
        seq = self._seq.get(partition, 0)
        batch = build_batch(
            [(None, v, [], int(time.time() * 1000)) for v in values],
            producer_id=self._pid[0],
            producer_epoch=self._pid[1],
            base_sequence=seq,
        )
        deadline = time.monotonic() + self.retry_for_s
        retries = 0
        while True:
            node = self.target(partition)
            started = time.perf_counter()
            try:
                resp = self._call(node, _PRODUCE, _PRODUCE_V, self._produce(partition, batch))
            except (OSError, ConnectionError, KeyError) as exc:
                self._drop(node)
                why = f"node {node}: {type(exc).__name__}: {exc}"
            else:
                p = resp.responses[0].partition_responses[0]
                code = ErrorCode(p.error_code)
                if code == ErrorCode.none:
                    self._seq[partition] = seq + len(values)
                    return Sent(
                        partition,
                        values,
                        int(p.base_offset),
                        time.perf_counter() - started,
                        node,
                        retries,
                    )
                if not code.retriable:
                    raise AssertionError(
                        f"{self.topic}-{partition} via {node}: {code.name}: {p.error_message}"
                    )
                why = f"node {node}: {code.name}: {p.error_message}"
            self.errors.append((partition, why))
            retries += 1
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.topic}-{partition} not acknowledged: {why}")
            time.sleep(0.2)
            try:
                self.refresh()
            except (OSError, ConnectionError, AssertionError, ValueError):
                pass

    def send_pipelined(self, partition: int, batches: list[list[bytes]]) -> list[Sent]:
        """Produce ``batches`` to ``partition`` as back-to-back requests on one
        connection (all written before any answer is read), no retries: a
        broker must append them in order for their sequences to be accepted."""
        node = self.target(partition)
        seq = self._seq.get(partition, 0)
        frames = []
        for values in batches:
            batch = build_batch(
                [(None, v, [], int(time.time() * 1000)) for v in values],
                producer_id=self._pid[0],
                producer_epoch=self._pid[1],
                base_sequence=seq,
            )
            seq += len(values)
            frames.append(self._produce(partition, batch))
        conn = self._conns.get(node)
        if conn is None:
            sock = socket.create_connection(
                self._endpoint(node), timeout=self.timeout_ms / 1000 + 10
            )
            conn = self._conns[node] = _Conn(sock)
        started = time.perf_counter()
        first = conn.corr + 1
        for fields in frames:
            conn.corr += 1
            request = build(request_class(_PRODUCE, _PRODUCE_V), fields)
            conn.sock.sendall(
                encode_request(_PRODUCE, _PRODUCE_V, conn.corr, self.client_id, request)
            )
        out = []
        for i, values in enumerate(batches):
            (size,) = struct.unpack(">i", _read(conn.sock, 4))
            corr, resp = decode_response(_PRODUCE, _PRODUCE_V, _read(conn.sock, size))
            assert corr == first + i
            p = resp.responses[0].partition_responses[0]
            code = ErrorCode(p.error_code)
            if code != ErrorCode.none:
                raise AssertionError(
                    f"pipelined batch {i} via {node}: {code.name}: {p.error_message}"
                )
            out.append(
                Sent(partition, values, int(p.base_offset), time.perf_counter() - started, node, 0)
            )
        self._seq[partition] = seq
        return out

    def _produce(self, partition: int, batch: bytes) -> dict[str, Any]:
        return {
            "transactional_id": None,
            "acks": -1,
            "timeout": self.timeout_ms,
            "topic_data": [
                {"name": self.topic, "partition_data": [{"index": partition, "records": batch}]}
            ],
        }

    # --- connections ------------------------------------------------------------------
    def _endpoint(self, node: int) -> tuple[str, int]:
        for b in self._brokers:
            if b.node_id == node:
                return b.host, b.port
        raise KeyError(f"node {node} is not a live broker")

    def _call_any(
        self, api_key: int, version: int, values: dict[str, Any], client_id: str | None = None
    ) -> Any:
        last: Exception | None = None
        for node in [b.node_id for b in self._brokers] or [-1]:
            try:
                return self._call(node, api_key, version, values, client_id=client_id)
            except (OSError, ConnectionError, KeyError) as exc:
                self._drop(node)
                last = exc
        for i, where in enumerate(self.bootstrap):
            try:
                return self._call(-100 - i, api_key, version, values, where, client_id)
            except (OSError, ConnectionError) as exc:
                self._drop(-100 - i)
                last = exc
        raise ConnectionError(f"no broker answered: {last}")

    def _call(
        self,
        node: int,
        api_key: int,
        version: int,
        values: dict[str, Any],
        where: tuple[str, int] | None = None,
        client_id: str | None = None,
    ) -> Any:
        conn = self._conns.get(node)
        if conn is None:
            sock = socket.create_connection(
                where or self._endpoint(node), timeout=self.timeout_ms / 1000 + 10
            )
            conn = self._conns[node] = _Conn(sock)
        conn.corr += 1
        request = build(request_class(api_key, version), values)
        sender = client_id or self.client_id
        conn.sock.sendall(encode_request(api_key, version, conn.corr, sender, request))
        (size,) = struct.unpack(">i", _read(conn.sock, 4))
        corr, response = decode_response(api_key, version, _read(conn.sock, size))
        assert corr == conn.corr
        return response

    def _drop(self, node: int) -> None:
        conn = self._conns.pop(node, None)
        if conn is not None:
            conn.sock.close()


def _read(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        out += chunk
    return bytes(out)
