"""What the zone router needs of a broker, found without widening its interface."""

from __future__ import annotations

from typing import Any

from ingest.s3stream.objectstore.api import ObjectStore

__all__ = ["object_store_of"]


def object_store_of(broker: Any) -> ObjectStore | None:
    """The object store the broker's stream engine writes to (shared by the
    cluster), or None for an engine without one."""
    store = getattr(broker.engine, "object_store", None)
    return store if store is not None and hasattr(store, "put") else None
