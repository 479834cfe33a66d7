"""Cluster-wide reads for the console, the lag gauges and the CLI: consumer
groups (listed, described by their coordinators) and partition ends (asked
of their leaders), from every live broker of the cluster. A single broker
answers everything locally."""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.cluster_reads.aggregate import ClusterGroup, ClusterReads, GroupListing, PartitionState
from api.cluster_reads.local import LocalReads
from api.cluster_reads.model import (
    BrokerReads,
    GroupInfo,
    ListedGroup,
    MemberInfo,
    PartitionEnds,
    decode_assignment,
)
from api.cluster_reads.peer import NoListenerReads, PeerReads
from ingest.cluster.view import BrokerEndpoint

if TYPE_CHECKING:
    from ingest.broker import Broker

__all__ = [
    "BrokerReads",
    "ClusterGroup",
    "ClusterReads",
    "GroupInfo",
    "GroupListing",
    "ListedGroup",
    "MemberInfo",
    "PartitionEnds",
    "PartitionState",
    "cluster_reads",
    "peer_endpoint",
    "decode_assignment",
]


def peer_endpoint(broker: Broker, endpoint: BrokerEndpoint) -> BrokerEndpoint | None:
    """Where ``broker`` reaches another broker: its inter-broker listener (the
    one transaction markers use), None when that broker has no such listener."""
    return endpoint.on(broker.inter_broker_listener)


def cluster_reads(broker: Broker, timeout_s: float = 3.0) -> ClusterReads:
    """The reads of ``broker``'s cluster as it sees it now (its view changes
    as brokers come and go; each call reads the current one). Other brokers
    are asked on their inter-broker listener."""

    def peer(endpoint: BrokerEndpoint) -> BrokerReads:
        reachable = peer_endpoint(broker, endpoint)
        if reachable is None:
            return NoListenerReads(endpoint.node_id, broker.inter_broker_listener)
        return PeerReads(reachable, timeout_s, broker.peer_security)

    return ClusterReads(lambda: broker.cluster, LocalReads(broker), peer, timeout_s)
