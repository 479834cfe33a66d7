"""Where transactional ids' records live: the ``TxnStore`` contract.

Every change of a record is one ``put`` (the whole record, atomically), so a
crash leaves either the old or the new record, never half of one. The
metadata-store implementation keeps one key per transactional id in the
store's key/value table: SQLite for a single broker, PostgreSQL shared by the
brokers of a cluster (a coordinator that takes over an id reads its record
from there).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Protocol

from ingest.metadata.api import MetadataStore
from ingest.txn.model import Offsets, TxnRecord, offsets_from_json, offsets_to_json

__all__ = ["TxnStore", "MemoryTxnStore", "MetadataTxnStore"]

_PREFIX = "txn/"
_OFFSETS = "txnoff/"


def _offsets_prefix(transactional_id: str) -> str:
    # the length keeps ids apart that are prefixes of one another
    return f"{_OFFSETS}{len(transactional_id)}:{transactional_id}/"


class TxnStore(Protocol):
    """Synchronous and thread-safe; async callers use a worker thread."""

    def get(self, transactional_id: str) -> TxnRecord | None: ...

    def put(self, record: TxnRecord) -> None: ...

    def delete(self, transactional_id: str) -> None: ...

    def all(self) -> list[TxnRecord]: ...

    # Offsets sent to a transaction (TxnOffsetCommit), one entry per
    # (transactional id, group), written by the group's coordinator.
    def put_offsets(self, transactional_id: str, group: str, offsets: Offsets) -> None: ...

    def get_offsets(self, transactional_id: str) -> dict[str, Offsets]:
        """group -> its pending offsets."""
        ...

    def delete_offsets(self, transactional_id: str) -> None: ...

    def pending_partitions(self, group: str) -> set[tuple[str, int]]:
        """Partitions of ``group`` with an offset in some transaction's entry."""
        ...


class MemoryTxnStore:
    def __init__(self) -> None:
        self._records: dict[str, str] = {}
        self._offsets: dict[str, str] = {}  # key as in the metadata store -> entry
        self._lock = threading.Lock()

    def put_offsets(self, transactional_id: str, group: str, offsets: Offsets) -> None:
        text = offsets_to_json(transactional_id, group, offsets)
        with self._lock:
            self._offsets[_offsets_prefix(transactional_id) + group] = text

    def get_offsets(self, transactional_id: str) -> dict[str, Offsets]:
        prefix = _offsets_prefix(transactional_id)
        with self._lock:
            texts = [t for k, t in self._offsets.items() if k.startswith(prefix)]
        return _by_group(texts)

    def delete_offsets(self, transactional_id: str) -> None:
        prefix = _offsets_prefix(transactional_id)
        with self._lock:
            for key in [k for k in self._offsets if k.startswith(prefix)]:
                del self._offsets[key]

    def pending_partitions(self, group: str) -> set[tuple[str, int]]:
        with self._lock:
            texts = list(self._offsets.values())
        return _partitions_of(group, texts)

    def get(self, transactional_id: str) -> TxnRecord | None:
        with self._lock:
            text = self._records.get(transactional_id)
        return None if text is None else TxnRecord.from_json(text)

    def put(self, record: TxnRecord) -> None:
        text = record.to_json()  # a copy: later changes to ``record`` stay out
        with self._lock:
            self._records[record.transactional_id] = text

    def delete(self, transactional_id: str) -> None:
        with self._lock:
            self._records.pop(transactional_id, None)

    def all(self) -> list[TxnRecord]:
        with self._lock:
            texts = list(self._records.values())
        return sorted((TxnRecord.from_json(t) for t in texts), key=lambda r: r.transactional_id)


class MetadataTxnStore:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    def put_offsets(self, transactional_id: str, group: str, offsets: Offsets) -> None:
        self._store.put_kv(
            _offsets_prefix(transactional_id) + group,
            offsets_to_json(transactional_id, group, offsets),
        )

    def get_offsets(self, transactional_id: str) -> dict[str, Offsets]:
        return _by_group(self._store.list_kv(_offsets_prefix(transactional_id)).values())

    def delete_offsets(self, transactional_id: str) -> None:
        for key in self._store.list_kv(_offsets_prefix(transactional_id)):
            self._store.delete_kv(key)

    def pending_partitions(self, group: str) -> set[tuple[str, int]]:
        return _partitions_of(group, self._store.list_kv(_OFFSETS).values())

    def get(self, transactional_id: str) -> TxnRecord | None:
        text = self._store.get_kv(_PREFIX + transactional_id)
        return None if text is None else TxnRecord.from_json(text)

    def put(self, record: TxnRecord) -> None:
        self._store.put_kv(_PREFIX + record.transactional_id, record.to_json())

    def delete(self, transactional_id: str) -> None:
        self._store.delete_kv(_PREFIX + transactional_id)

    def all(self) -> list[TxnRecord]:
        rows = self._store.list_kv(_PREFIX)
        return sorted(
            (TxnRecord.from_json(t) for t in rows.values()), key=lambda r: r.transactional_id
        )


def _by_group(texts: Iterable[str]) -> dict[str, Offsets]:
    out: dict[str, Offsets] = {}
    for text in texts:
        _tid, group, offsets = offsets_from_json(text)
        out[group] = offsets
    return out


def _partitions_of(group: str, texts: Iterable[str]) -> set[tuple[str, int]]:
    out: set[tuple[str, int]] = set()
    for text in texts:
        _tid, g, offsets = offsets_from_json(text)
        if g == group:
            out |= set(offsets)
    return out
