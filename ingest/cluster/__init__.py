"""Cluster control: membership, the controller lease and partition leadership.

Open the store shared by a cluster's brokers with :func:`open_cluster_store`
(PostgreSQL for real, ``memory://`` for tests); the contract is
:class:`ClusterStore` in :mod:`ingest.cluster.api`.
"""

from __future__ import annotations

from ingest.cluster.api import (
    NO_LEADER,
    BrokerInfo,
    BrokerLoad,
    ClusterStore,
    ControllerLease,
    ListenerEndpoint,
    Move,
    PartitionAssignment,
    PartitionLoad,
)
from ingest.cluster.errors import (
    ClusterError,
    ControllerFencedError,
    NodeIdInUseError,
    StaleAssignmentError,
    UnknownPartitionError,
)
from ingest.cluster.factory import open_cluster_store
from ingest.cluster.memory import MemoryClusterStore

__all__ = [
    "NO_LEADER",
    "BrokerInfo",
    "BrokerLoad",
    "ClusterError",
    "ClusterStore",
    "ControllerFencedError",
    "ControllerLease",
    "ListenerEndpoint",
    "MemoryClusterStore",
    "Move",
    "NodeIdInUseError",
    "PartitionAssignment",
    "PartitionLoad",
    "StaleAssignmentError",
    "UnknownPartitionError",
    "open_cluster_store",
]
