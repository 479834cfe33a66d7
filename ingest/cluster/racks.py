"""Racks (availability zones) of clients and brokers: which broker a consumer
should read a partition from (KIP-392), and the rack a client announces.

Pure functions, no I/O. Every broker computes the same answer from the same
cluster view, so a partition's consumers in one rack all read from the same
broker there (its block cache serves them all).

A consumer announces its rack with ``client.rack`` (the Fetch request's
``rack_id``, v11+). A producer has no such field in the protocol: it puts
``tidelake_rack=<rack>`` in its ``client.id`` (a key=value pair, separated
from the rest of the id by ``,``, ``;``, ``&`` or a space, e.g.
``orders-svc,tidelake_rack=eu-west-1a``). A client that announces nothing is
in rack ``""``.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

from ingest.cluster.view import BrokerEndpoint

__all__ = [
    "CLIENT_ID_RACK_KEY",
    "FETCH",
    "PRODUCE",
    "RackTraffic",
    "client_id_rack",
    "preferred_read_replica",
]

CLIENT_ID_RACK_KEY = "tidelake_rack"
PRODUCE, FETCH = "produce", "fetch"
_CLIENT_ID_RACK = re.compile(r"(?:^|[,;& ])" + CLIENT_ID_RACK_KEY + r"=([^,;& ]+)")


def preferred_read_replica(
    topic: str,
    partition: int,
    client_rack: str | None,
    leader_id: int,
    brokers: Sequence[BrokerEndpoint],
) -> int | None:
    """The broker a consumer in ``client_rack`` should fetch the partition
    from instead of its leader, or None to read from the leader: when the
    client sent no rack, the leader is in the client's rack already, or no
    live broker is in that rack. Among the brokers of the client's rack the
    choice is a hash of the partition over their node ids, so it stays put
    while those brokers do and spreads partitions over them."""
    if not client_rack:
        return None
    same_rack: list[int] = []
    for b in brokers:
        if b.rack != client_rack:
            continue
        if b.node_id == leader_id:
            return None
        same_rack.append(b.node_id)
    if not same_rack:
        return None
    same_rack.sort()
    return same_rack[zlib.crc32(f"{topic}\0{partition}".encode()) % len(same_rack)]


def client_id_rack(client_id: str | None) -> str:
    """The rack a client announces in its ``client.id`` (``tidelake_rack=<rack>``),
    or ``""``."""
    if not client_id or CLIENT_ID_RACK_KEY not in client_id:
        return ""
    m = _CLIENT_ID_RACK.search(client_id)
    return m.group(1) if m else ""


class RackTraffic:
    """Payload bytes (record batches) between this broker and its clients, by
    the client's rack (``""``: unknown) and direction (``produce``: from the
    client, ``fetch``: to it). Counted on the request path; read by metrics."""

    def __init__(self) -> None:
        self._bytes: dict[tuple[str, str], int] = {}

    def add(self, client_rack: str, direction: str, nbytes: int) -> None:
        if nbytes > 0:
            key = (client_rack, direction)
            self._bytes[key] = self._bytes.get(key, 0) + nbytes

    def totals(self) -> dict[tuple[str, str], int]:
        """(client rack, direction) -> bytes since the broker started."""
        return dict(self._bytes)
