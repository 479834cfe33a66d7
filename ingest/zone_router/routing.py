"""Which broker a producer in a rack is told leads a partition (pure, no I/O).

A producer announces its rack in its ``client.id`` with the token
``tidelake_rack=<rack>`` (parsed in one place:
:func:`ingest.cluster.racks.client_id_rack`, re-exported here as
:func:`client_rack`). A client that announces nothing is in rack ``""`` and
is routed nowhere: it sees the real leaders, exactly as with Kafka.

For a client in rack ``r`` Metadata names, as a partition's leader:
- the real leader when it is in ``r``, when ``r`` has no live broker, or when
  the partition has no leader (-1);
- otherwise one live broker of ``r``, chosen by a hash of topic and partition
  over ``r``'s live brokers by node id, the same broker a consumer of that
  rack is sent to for reads (:func:`ingest.cluster.racks.preferred_read_replica`).
  Every broker computes the same choice.

That broker does not lead the partition: it writes the client's batches to
object storage and has the leader append them (see :mod:`ingest.zone_router`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ingest.cluster.racks import client_id_rack as client_rack
from ingest.cluster.racks import preferred_read_replica
from ingest.cluster.view import BrokerEndpoint

__all__ = ["client_rack", "leader_for_client", "routed_leader", "routed_leaders"]


def routed_leader(
    topic: str,
    partition: int,
    client_rack: str,
    leader_id: int,
    brokers: Sequence[BrokerEndpoint],
) -> int:
    """The node id a client in ``client_rack`` should produce ``topic``-``partition``
    to (``leader_id`` is the real leader, -1 for none; ``brokers`` the live ones)."""
    if leader_id < 0:
        return leader_id
    chosen = preferred_read_replica(topic, partition, client_rack, leader_id, brokers)
    return leader_id if chosen is None else chosen


def routed_leaders(
    client_rack: str,
    leaders: Mapping[tuple[str, int], int],
    brokers: Sequence[BrokerEndpoint],
) -> dict[tuple[str, int], int]:
    """:func:`routed_leader` for every partition of ``leaders`` ((topic,
    partition) -> real leader id)."""
    return {
        (topic, partition): routed_leader(topic, partition, client_rack, leader, brokers)
        for (topic, partition), leader in leaders.items()
    }


def leader_for_client(
    client_id: str | None,
    topic: str,
    partition: int,
    leader_id: int,
    brokers: Sequence[BrokerEndpoint],
) -> int:
    """The leader Metadata names to the client ``client_id`` (its ``client.id``):
    :func:`routed_leader` for the rack it announces, the real leader when it
    announces none. ``brokers``: the live brokers Metadata lists to this client
    (those with the request's listener), so the answer is always one of them
    or the real leader."""
    return routed_leader(topic, partition, client_rack(client_id), leader_id, brokers)
