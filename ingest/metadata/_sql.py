"""The SQL metadata store shared by the SQLite and PostgreSQL dialects.

Every public method is one transaction (``_tx``). Subclasses provide the
connection, the schema and the few dialect differences. SQL here uses ``?``
placeholders; a dialect whose driver wants another style converts them.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ingest.metadata.api import (
    AbortedTxn,
    AclRecord,
    CommittedOffset,
    ObjectRange,
    ObjectRecord,
    PartitionRecord,
    ScramCredentialRecord,
    StreamRecord,
    TopicRecord,
    TxnCheckpoint,
    Writer,
)
from ingest.metadata.errors import (
    TopicExistsError,
    UnknownStreamError,
    UnknownTopicError,
    ensure_current_epoch,
    ensure_owner,
)

__all__ = ["Cursor", "SqlMetadataStore"]

_STREAM_COLUMNS = "stream_id, start_offset, end_offset, deleted, owner, owner_epoch"
_SCRAM_COLUMNS = "username, mechanism, salt, stored_key, server_key, iterations"
_ACL_COLUMNS = "resource_type, resource_name, pattern_type, principal, host, operation, permission"
_ACL_WHERE = " AND ".join(f"{c} = ?" for c in _ACL_COLUMNS.split(", "))
_CHUNK = 500  # ids per IN (...) list


class Cursor(Protocol):
    """The DB-API cursor subset used here (``?`` placeholders)."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, sql: str, params: Sequence[Any] = ...) -> Any: ...

    def executemany(self, sql: str, params: Iterable[Sequence[Any]]) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class SqlMetadataStore(ABC):
    """Base of the SQL stores: implements :class:`~ingest.metadata.api.MetadataStore`."""

    _greatest = "MAX"  # the two-argument maximum: MAX in SQLite, GREATEST in PostgreSQL
    _for_update = ""  # row lock suffix: none in SQLite (transactions are serial)
    _for_share = ""  # shared row lock suffix: none in SQLite

    @abstractmethod
    def _tx(self) -> AbstractContextManager[Cursor]:
        """One serialised transaction; commits on success, rolls back on error."""

    @abstractmethod
    def close(self) -> None:
        """Release the connection(s)."""

    @staticmethod
    def _counter(cur: Cursor, name: str) -> int:
        cur.execute(
            "INSERT INTO counters(name, value) VALUES (?, 1) "
            "ON CONFLICT(name) DO UPDATE SET value = counters.value + 1 RETURNING value",
            (name,),
        )
        row = cur.fetchone()
        return int(row[0])

    # --- topics and partitions -------------------------------------------
    def create_topic(self, topic: TopicRecord, stream_ids: Sequence[int]) -> None:
        with self._tx() as cur:
            cur.execute(
                "INSERT INTO topics VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
                (
                    topic.name,
                    topic.topic_id,
                    topic.partitions,
                    topic.replication_factor,
                    json.dumps(topic.configs, sort_keys=True),
                ),
            )
            if cur.rowcount == 0:
                raise TopicExistsError(f"topic {topic.name!r} already exists")
            cur.executemany(
                "INSERT INTO partitions VALUES (?, ?, ?, 0)",
                [(topic.name, i, sid) for i, sid in enumerate(stream_ids)],
            )

    @staticmethod
    def _topic(row: tuple[str, str, int, int, str]) -> TopicRecord:
        return TopicRecord(row[0], row[1], int(row[2]), int(row[3]), dict(json.loads(row[4])))

    def get_topic(self, name: str) -> TopicRecord | None:
        with self._tx() as cur:
            cur.execute("SELECT * FROM topics WHERE name = ?", (name,))
            row = cur.fetchone()
            return None if row is None else self._topic(row)

    def list_topics(self) -> list[TopicRecord]:
        with self._tx() as cur:
            cur.execute("SELECT * FROM topics ORDER BY name")
            return [self._topic(r) for r in cur.fetchall()]

    def delete_topic(self, name: str) -> list[int]:
        with self._tx() as cur:
            cur.execute("DELETE FROM topics WHERE name = ?", (name,))
            if cur.rowcount == 0:
                raise UnknownTopicError(f"unknown topic {name!r}")
            cur.execute(
                "SELECT stream_id FROM partitions WHERE topic = ? ORDER BY partition", (name,)
            )
            ids = [int(r[0]) for r in cur.fetchall()]
            cur.execute("DELETE FROM partitions WHERE topic = ?", (name,))
            return ids

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        with self._tx() as cur:
            cur.execute(
                "UPDATE topics SET configs = ? WHERE name = ?",
                (json.dumps(configs, sort_keys=True), name),
            )
            if cur.rowcount == 0:
                raise UnknownTopicError(f"unknown topic {name!r}")

    def add_partitions(self, name: str, stream_ids: Sequence[int]) -> None:
        with self._tx() as cur:
            cur.execute(f"SELECT partitions FROM topics WHERE name = ?{self._for_update}", (name,))
            row = cur.fetchone()
            if row is None:
                raise UnknownTopicError(f"unknown topic {name!r}")
            cur.execute("SELECT COUNT(*) FROM partitions WHERE topic = ?", (name,))
            n = int(cur.fetchone()[0])
            cur.executemany(
                "INSERT INTO partitions VALUES (?, ?, ?, 0)",
                [(name, n + i, sid) for i, sid in enumerate(stream_ids)],
            )
            cur.execute(
                "UPDATE topics SET partitions = ? WHERE name = ?", (n + len(stream_ids), name)
            )

    def list_partitions(self, topic: str) -> list[PartitionRecord]:
        with self._tx() as cur:
            cur.execute("SELECT 1 FROM topics WHERE name = ?", (topic,))
            if cur.fetchone() is None:
                raise UnknownTopicError(f"unknown topic {topic!r}")
            cur.execute(
                "SELECT topic, partition, stream_id, leader_epoch FROM partitions "
                "WHERE topic = ? ORDER BY partition",
                (topic,),
            )
            return [PartitionRecord(r[0], int(r[1]), int(r[2]), int(r[3])) for r in cur]

    # --- streams and objects -------------------------------------------------
    def create_stream(self, *, writer: Writer | None = None) -> int:
        with self._tx() as cur:
            self._check_writer(cur, writer)
            sid = self._counter(cur, "stream_id")
            cur.execute(
                "INSERT INTO streams (stream_id, start_offset, end_offset, deleted) "
                "VALUES (?, 0, 0, 0)",
                (sid,),
            )
            return sid

    @staticmethod
    def _stream(row: Sequence[Any]) -> StreamRecord:
        return StreamRecord(
            int(row[0]), int(row[1]), int(row[2]), bool(row[3]), row[4], int(row[5])
        )

    def get_stream(self, stream_id: int) -> StreamRecord | None:
        with self._tx() as cur:
            cur.execute(f"SELECT {_STREAM_COLUMNS} FROM streams WHERE stream_id = ?", (stream_id,))
            row = cur.fetchone()
            return None if row is None else self._stream(row)

    def list_streams(self) -> list[StreamRecord]:
        with self._tx() as cur:
            cur.execute(f"SELECT {_STREAM_COLUMNS} FROM streams ORDER BY stream_id")
            return [self._stream(r) for r in cur.fetchall()]

    def _lock_streams(self, cur: Cursor, stream_ids: Iterable[int]) -> dict[int, tuple[int, Any]]:
        """``{stream_id: (end_offset, owner)}`` of every stream, row-locked to the
        end of the transaction in stream id order (PostgreSQL), so concurrent
        commits and claims never deadlock; ``UnknownStreamError`` if one is
        missing."""
        ids = sorted(set(stream_ids))
        found: dict[int, tuple[int, Any]] = {}
        for i in range(0, len(ids), _CHUNK):
            chunk = ids[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            cur.execute(
                f"SELECT stream_id, end_offset, owner FROM streams WHERE stream_id IN ({marks}) "
                f"ORDER BY stream_id{self._for_update}",
                chunk,
            )
            for r in cur.fetchall():
                found[int(r[0])] = (int(r[1]), r[2])
        for sid in ids:
            if sid not in found:
                raise UnknownStreamError(f"unknown stream {sid}")
        return found

    def claim_streams(self, stream_ids: Sequence[int], *, writer: Writer) -> dict[int, int]:
        with self._tx() as cur:
            self._check_writer(cur, writer)
            claimed: dict[int, int] = {}
            for sid in sorted(set(stream_ids)):  # one lock order for every claimer
                cur.execute(
                    "UPDATE streams SET owner = ?, owner_epoch = owner_epoch + 1 "
                    "WHERE stream_id = ? AND deleted = 0 RETURNING owner_epoch",
                    (writer[0], sid),
                )
                row = cur.fetchone()
                if row is None:
                    raise UnknownStreamError(f"unknown or deleted stream {sid}")
                claimed[sid] = int(row[0])
            return claimed

    def trim_stream(
        self, stream_id: int, start_offset: int, *, writer: Writer | None = None
    ) -> None:
        with self._tx() as cur:
            self._check_writer(cur, writer)
            if writer is not None:
                _, owner = self._lock_streams(cur, [stream_id])[stream_id]
                ensure_owner(stream_id, owner, writer[0])
            cur.execute(
                f"UPDATE streams SET start_offset = {self._greatest}(start_offset, ?) WHERE stream_id = ?",
                (start_offset, stream_id),
            )
            if cur.rowcount == 0:
                raise UnknownStreamError(f"unknown stream {stream_id}")

    def delete_stream(self, stream_id: int, *, writer: Writer | None = None) -> None:
        with self._tx() as cur:
            self._check_writer(cur, writer)
            cur.execute("UPDATE streams SET deleted = 1 WHERE stream_id = ?", (stream_id,))
            if cur.rowcount == 0:
                raise UnknownStreamError(f"unknown stream {stream_id}")

    def next_object_id(self) -> int:
        with self._tx() as cur:
            return self._counter(cur, "object_id")

    def claim_writer(self, name: str) -> int:
        with self._tx() as cur:
            # one statement: concurrent claims queue on the row (PostgreSQL)
            # or the database lock (SQLite) and each gets its own epoch
            cur.execute(
                "INSERT INTO writers(name, epoch) VALUES (?, 1) "
                "ON CONFLICT(name) DO UPDATE SET epoch = writers.epoch + 1 RETURNING epoch",
                (name,),
            )
            return int(cur.fetchone()[0])

    def _check_writer(self, cur: Cursor, writer: Writer | None) -> None:
        """Raise ``WriterFencedError`` unless ``writer`` holds the current epoch.

        On PostgreSQL the row stays share-locked to the end of the
        transaction, so a concurrent claim waits for this commit (or this
        check waits for the claim and then sees the new epoch)."""
        if writer is None:
            return
        name, epoch = writer
        cur.execute(f"SELECT epoch FROM writers WHERE name = ?{self._for_share}", (name,))
        row = cur.fetchone()
        ensure_current_epoch(name, epoch, 0 if row is None else int(row[0]))

    def commit_object(
        self, obj: ObjectRecord, compacted: Iterable[int] = (), *, writer: Writer | None = None
    ) -> None:
        self.commit_objects([obj], compacted, writer=writer)

    def commit_objects(
        self,
        objs: Sequence[ObjectRecord],
        compacted: Iterable[int] = (),
        *,
        writer: Writer | None = None,
    ) -> None:
        with self._tx() as cur:
            self._check_writer(cur, writer)
            if writer is not None:
                self._check_owners(cur, objs, writer[0])
            for obj in objs:
                self._insert_object(cur, obj)
            self._delete_objects(cur, compacted)

    def _check_owners(self, cur: Cursor, objs: Sequence[ObjectRecord], name: str) -> None:
        """Raise ``StreamNotOwnedError`` if a range adds offsets to a stream
        owned by another writer than ``name`` (ends as of before this commit)."""
        streams = self._lock_streams(cur, (r.stream_id for o in objs for r in o.ranges))
        for obj in objs:
            for r in obj.ranges:
                end, owner = streams[r.stream_id]
                if r.end_offset > end:
                    ensure_owner(r.stream_id, owner, name)

    def _insert_object(self, cur: Cursor, obj: ObjectRecord) -> None:
        for r in obj.ranges:
            cur.execute(
                f"UPDATE streams SET end_offset = {self._greatest}(end_offset, ?) WHERE stream_id = ?",
                (r.end_offset, r.stream_id),
            )
            if cur.rowcount == 0:
                raise UnknownStreamError(f"unknown stream {r.stream_id}")
        cur.execute(
            "INSERT INTO objects VALUES (?, ?, ?, ?, ?)",
            (obj.object_id, obj.key, obj.size, obj.kind, obj.created_ms),
        )
        cur.executemany(
            "INSERT INTO object_ranges VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    obj.object_id,
                    i,
                    r.stream_id,
                    r.start_offset,
                    r.end_offset,
                    r.position,
                    r.length,
                )
                for i, r in enumerate(obj.ranges)
            ],
        )
        cur.execute(
            "INSERT INTO counters(name, value) VALUES ('object_id', ?) "
            f"ON CONFLICT(name) DO UPDATE SET value = {self._greatest}(counters.value, excluded.value)",
            (obj.object_id,),
        )

    @staticmethod
    def _delete_objects(cur: Cursor, object_ids: Iterable[int]) -> None:
        ids = [(int(i),) for i in object_ids]
        cur.executemany("DELETE FROM objects WHERE object_id = ?", ids)
        cur.executemany("DELETE FROM object_ranges WHERE object_id = ?", ids)

    def _load_objects(self, cur: Cursor, object_ids: list[int]) -> dict[int, ObjectRecord]:
        out: dict[int, ObjectRecord] = {}
        for i in range(0, len(object_ids), _CHUNK):
            chunk = object_ids[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            cur.execute(
                "SELECT object_id, stream_id, start_offset, end_offset, position, length "
                f"FROM object_ranges WHERE object_id IN ({marks}) ORDER BY object_id, idx",
                chunk,
            )
            ranges: dict[int, list[ObjectRange]] = {}
            for r in cur.fetchall():
                ranges.setdefault(int(r[0]), []).append(
                    ObjectRange(int(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]))
                )
            cur.execute(
                "SELECT object_id, key, size, kind, created_ms "
                f"FROM objects WHERE object_id IN ({marks})",
                chunk,
            )
            for r in cur.fetchall():
                oid = int(r[0])
                out[oid] = ObjectRecord(
                    oid, r[1], int(r[2]), r[3], tuple(ranges.get(oid, ())), int(r[4])
                )
        return out

    def objects_for_stream(
        self, stream_id: int, start_offset: int, end_offset: int, limit: int | None = None
    ) -> list[ObjectRecord]:
        with self._tx() as cur:
            cur.execute(
                "SELECT object_id, MIN(start_offset) AS s FROM object_ranges "
                "WHERE stream_id = ? AND end_offset > ? AND start_offset < ? "
                "GROUP BY object_id ORDER BY s, object_id"
                + ("" if limit is None else f" LIMIT {int(limit)}"),
                (stream_id, start_offset, end_offset),
            )
            ids = [int(r[0]) for r in cur.fetchall()]
            objs = self._load_objects(cur, ids)
            return [objs[i] for i in ids if i in objs]

    def list_objects(self) -> list[ObjectRecord]:
        with self._tx() as cur:
            cur.execute("SELECT object_id FROM objects ORDER BY object_id")
            ids = [int(r[0]) for r in cur.fetchall()]
            objs = self._load_objects(cur, ids)
            return [objs[i] for i in ids]

    def delete_objects(self, object_ids: Iterable[int], *, writer: Writer | None = None) -> None:
        with self._tx() as cur:
            self._check_writer(cur, writer)
            self._delete_objects(cur, object_ids)

    # --- consumer groups ---------------------------------------------------------
    def commit_offsets(self, group: str, offsets: Sequence[CommittedOffset]) -> None:
        with self._tx() as cur:
            cur.executemany(
                "INSERT INTO group_offsets VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (grp, topic, partition) DO UPDATE SET "
                '"offset" = excluded."offset", leader_epoch = excluded.leader_epoch, '
                "metadata = excluded.metadata, commit_ms = excluded.commit_ms",
                [
                    (
                        group,
                        o.topic,
                        o.partition,
                        o.offset,
                        o.leader_epoch,
                        o.metadata,
                        o.commit_ms,
                    )
                    for o in offsets
                ],
            )

    def fetch_offsets(
        self, group: str, topics: Iterable[str] | None = None
    ) -> list[CommittedOffset]:
        with self._tx() as cur:
            cur.execute(
                'SELECT topic, partition, "offset", leader_epoch, metadata, commit_ms '
                "FROM group_offsets WHERE grp = ? ORDER BY topic, partition",
                (group,),
            )
            wanted = None if topics is None else set(topics)
            return [
                CommittedOffset(r[0], int(r[1]), int(r[2]), int(r[3]), r[4], int(r[5]))
                for r in cur.fetchall()
                if wanted is None or r[0] in wanted
            ]

    def delete_group_offsets(self, group: str) -> None:
        with self._tx() as cur:
            cur.execute("DELETE FROM group_offsets WHERE grp = ?", (group,))

    def list_offset_groups(self) -> list[str]:
        with self._tx() as cur:
            cur.execute("SELECT DISTINCT grp FROM group_offsets ORDER BY grp")
            return [r[0] for r in cur.fetchall()]

    # --- producers and key/value ------------------------------------------------
    def allocate_producer_id(self) -> int:
        with self._tx() as cur:
            return self._counter(cur, "producer_id")

    # --- partitions' transaction checkpoints (aborted ranges as JSON) -------------
    def get_txn_checkpoint(self, stream_id: int) -> TxnCheckpoint | None:
        with self._tx() as cur:
            cur.execute(
                "SELECT stable_offset, aborted FROM txn_checkpoints WHERE stream_id = ?",
                (stream_id,),
            )
            row = cur.fetchone()
            if row is None:
                return None
            aborted = tuple(AbortedTxn(int(p), int(f), int(m)) for p, f, m in json.loads(row[1]))
            return TxnCheckpoint(int(row[0]), aborted)

    def put_txn_checkpoint(self, stream_id: int, checkpoint: TxnCheckpoint) -> None:
        aborted = json.dumps(
            [[a.producer_id, a.first_offset, a.last_offset] for a in checkpoint.aborted]
        )
        with self._tx() as cur:
            cur.execute(
                "INSERT INTO txn_checkpoints(stream_id, stable_offset, aborted) VALUES (?, ?, ?) "
                "ON CONFLICT (stream_id) DO UPDATE SET stable_offset = excluded.stable_offset, "
                "aborted = excluded.aborted",
                (stream_id, checkpoint.stable_offset, aborted),
            )

    def get_kv(self, key: str) -> str | None:
        with self._tx() as cur:
            cur.execute("SELECT value FROM kv WHERE key = ?", (key,))
            row = cur.fetchone()
            return None if row is None else str(row[0])

    def put_kv(self, key: str, value: str) -> None:
        with self._tx() as cur:
            cur.execute(
                "INSERT INTO kv(key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def list_kv(self, prefix: str) -> dict[str, str]:
        # LIKE with the prefix's wildcards escaped (a range would depend on the
        # database's collation); SQLite's LIKE ignores case, so filter again.
        pattern = prefix.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%"
        with self._tx() as cur:
            cur.execute("SELECT key, value FROM kv WHERE key LIKE ? ESCAPE '!'", (pattern,))
            return {str(k): str(v) for k, v in cur.fetchall() if str(k).startswith(prefix)}

    def delete_kv(self, key: str) -> None:
        with self._tx() as cur:
            cur.execute("DELETE FROM kv WHERE key = ?", (key,))

    # --- SASL/SCRAM credentials (binary values as hex, alike in both dialects) ---
    def put_scram_credential(self, record: ScramCredentialRecord) -> None:
        with self._tx() as cur:
            cur.execute(
                "INSERT INTO scram_credentials"
                "(username, mechanism, salt, stored_key, server_key, iterations) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (username, mechanism) DO UPDATE SET "
                "salt = excluded.salt, stored_key = excluded.stored_key, "
                "server_key = excluded.server_key, iterations = excluded.iterations",
                (
                    record.user,
                    record.mechanism,
                    record.salt.hex(),
                    record.stored_key.hex(),
                    record.server_key.hex(),
                    record.iterations,
                ),
            )

    def get_scram_credential(self, user: str, mechanism: str) -> ScramCredentialRecord | None:
        with self._tx() as cur:
            cur.execute(
                f"SELECT {_SCRAM_COLUMNS} FROM scram_credentials "
                "WHERE username = ? AND mechanism = ?",
                (user, mechanism),
            )
            row = cur.fetchone()
            return None if row is None else _scram_record(row)

    def delete_scram_credentials(self, user: str, mechanism: str | None = None) -> bool:
        with self._tx() as cur:
            if mechanism is None:
                cur.execute("DELETE FROM scram_credentials WHERE username = ?", (user,))
            else:
                cur.execute(
                    "DELETE FROM scram_credentials WHERE username = ? AND mechanism = ?",
                    (user, mechanism),
                )
            return cur.rowcount > 0

    def list_scram_credentials(self, user: str | None = None) -> list[ScramCredentialRecord]:
        with self._tx() as cur:
            if user is None:
                cur.execute(
                    f"SELECT {_SCRAM_COLUMNS} FROM scram_credentials ORDER BY username, mechanism"
                )
            else:
                cur.execute(
                    f"SELECT {_SCRAM_COLUMNS} FROM scram_credentials WHERE username = ? "
                    "ORDER BY mechanism",
                    (user,),
                )
            return [_scram_record(r) for r in cur.fetchall()]

    # --- ACL bindings (the acl_version counter moves with every change) ----------
    def put_acl(self, record: AclRecord) -> bool:
        with self._tx() as cur:
            cur.execute(
                f"INSERT INTO acls({_ACL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                _acl_row(record),
            )
            added = cur.rowcount > 0
            if added:
                self._counter(cur, "acl_version")
            return added

    def delete_acl(self, record: AclRecord) -> bool:
        with self._tx() as cur:
            cur.execute(f"DELETE FROM acls WHERE {_ACL_WHERE}", _acl_row(record))
            removed = cur.rowcount > 0
            if removed:
                self._counter(cur, "acl_version")
            return removed

    def list_acls(self) -> list[AclRecord]:
        with self._tx() as cur:
            cur.execute(f"SELECT {_ACL_COLUMNS} FROM acls ORDER BY {_ACL_COLUMNS}")
            return [
                AclRecord(
                    int(r[0]), str(r[1]), int(r[2]), str(r[3]), str(r[4]), int(r[5]), int(r[6])
                )
                for r in cur.fetchall()
            ]

    def acl_version(self) -> int:
        with self._tx() as cur:
            cur.execute("SELECT value FROM counters WHERE name = 'acl_version'")
            row = cur.fetchone()
            return 0 if row is None else int(row[0])


def _acl_row(r: AclRecord) -> tuple[int, str, int, str, str, int, int]:
    return (
        r.resource_type,
        r.resource_name,
        r.pattern_type,
        r.principal,
        r.host,
        r.operation,
        r.permission_type,
    )


def _scram_record(row: Sequence[Any]) -> ScramCredentialRecord:
    return ScramCredentialRecord(
        str(row[0]),
        str(row[1]),
        bytes.fromhex(row[2]),
        bytes.fromhex(row[3]),
        bytes.fromhex(row[4]),
        int(row[5]),
    )
