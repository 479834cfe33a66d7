"""Serving partitions this broker does not lead to consumers (KIP-392), from
object storage: see :mod:`ingest.replica.reader`."""

from __future__ import annotations

from ingest.replica.reader import ReplicaRead, ReplicaReader

__all__ = ["ReplicaRead", "ReplicaReader"]
