"""Errors of cluster control."""

from __future__ import annotations

from ingest.errors import TidelakeError

__all__ = [
    "ClusterError",
    "ControllerFencedError",
    "NodeIdInUseError",
    "StaleAssignmentError",
    "UnknownPartitionError",
]


class ClusterError(TidelakeError):
    """Base of cluster control errors."""


class ControllerFencedError(ClusterError):
    """A controller epoch that is no longer current tried to change assignments."""


class NodeIdInUseError(ClusterError):
    """Another live broker is registered with this node id."""


class StaleAssignmentError(ClusterError):
    """A leadership change based on an epoch that moved on."""


class UnknownPartitionError(ClusterError):
    """No assignment exists for the partition."""
