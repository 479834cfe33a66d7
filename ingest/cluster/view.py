"""What the request path asks of the cluster: who leads a partition, which
brokers exist, who is the controller.

Handlers only ever talk to a :class:`ClusterView`; it answers from memory
(no store round trip per request). A single broker on the embedded defaults
uses :class:`SingleBrokerView` (it leads everything); a broker of a cluster
uses :class:`ingest.cluster.member.ClusterMember`, which keeps its view in
step with the shared store.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from ingest.cluster.api import ListenerEndpoint
from ingest.errors import ConfigError

__all__ = [
    "BrokerEndpoint",
    "ClusterView",
    "ListenerEndpoint",
    "SingleBrokerView",
    "brokers_on",
    "hashed_coordinator",
    "inter_broker_listener",
]

_PLAINTEXT = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """A broker and where clients reach it: ``host``:``port`` is its default
    listener's address; ``listeners`` every listener it advertises (empty
    when only the default address is known, as for a broker that registered
    before listeners were registered)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    listeners: tuple[ListenerEndpoint, ...] = ()

    def on(self, listener: str | None) -> BrokerEndpoint | None:
        """This broker as a client on listener ``listener`` must reach it
        (host and port of its listener of that name), or None if it has no
        such listener. ``None`` (the listener is unknown), or a broker with no
        listeners registered, gives the default address."""
        if listener is None or not self.listeners:
            return self
        for x in self.listeners:
            if x.name == listener:
                if (x.host, x.port) == (self.host, self.port):
                    return self
                return replace(self, host=x.host, port=x.port)
        return None


class ClusterView(Protocol):
    @property
    def node_id(self) -> int: ...

    @property
    def clustered(self) -> bool:
        """True for a broker of a multi-broker cluster."""

    def brokers(self) -> Sequence[BrokerEndpoint]:
        """The live brokers, by node id (this one included)."""

    def controller_id(self) -> int:
        """The active controller's node id, or -1 when there is none."""

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        """(leader node id, leader epoch) of a partition; node -1 while it has none."""

    def coordinator_for(self, group: str) -> BrokerEndpoint:
        """The broker that coordinates consumer group ``group``."""


class SingleBrokerView:
    """One broker that is its own cluster: it leads every partition."""

    def __init__(self, endpoint: BrokerEndpoint) -> None:
        self._endpoint = endpoint

    @property
    def node_id(self) -> int:
        return self._endpoint.node_id

    @property
    def clustered(self) -> bool:
        return False

    def brokers(self) -> Sequence[BrokerEndpoint]:
        return (self._endpoint,)

    def controller_id(self) -> int:
        return self._endpoint.node_id

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        return self._endpoint.node_id, 0

    def coordinator_for(self, group: str) -> BrokerEndpoint:
        return self._endpoint


def brokers_on(brokers: Sequence[BrokerEndpoint], listener: str | None) -> list[BrokerEndpoint]:
    """``brokers`` at their listener named ``listener``, leaving out those that
    have none (Kafka leaves a broker without the request's listener out of
    Metadata's broker list)."""
    return [e for b in brokers if (e := b.on(listener)) is not None]


def hashed_coordinator(group: str, brokers: Sequence[BrokerEndpoint]) -> BrokerEndpoint:
    """Groups are spread over the live brokers by a hash of the group id that
    every broker computes alike (CRC-32 of the id over brokers by node id), so
    all members of a group find the same coordinator. Committed offsets live
    in the shared metadata store: when the brokers change, a group moves,
    its members get NOT_COORDINATOR, find the new one and rejoin."""
    ordered = sorted(brokers, key=lambda b: b.node_id)
    return ordered[zlib.crc32(group.encode()) % len(ordered)]


def inter_broker_listener(listeners: Sequence[tuple[str, str]], configured: str | None) -> str:
    """The name of the listener a broker reaches the other brokers on (Kafka's
    ``inter.broker.listener.name``), from its ``(name, security protocol)``
    listeners, the default one first: ``configured``, else the first PLAINTEXT
    listener, else the default one. How a broker logs in there (TLS, SASL) is
    :class:`~ingest.cluster.peer_connection.PeerSecurity`'s, which refuses
    settings that lack what the listener needs."""
    key = "inter_broker_listener_name"
    protocols = dict(listeners)
    if configured is not None:
        name = configured.upper()
        if name not in protocols:
            raise ConfigError(key, f"no listener named {name} (listeners: {list(protocols)})")
    else:
        plain = [n for n, p in listeners if p == _PLAINTEXT]
        name = plain[0] if plain else listeners[0][0]
    return name
