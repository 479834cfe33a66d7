"""Cluster control on PostgreSQL: the store every broker of a cluster shares.

Tables of its own (``cluster_brokers``, ``cluster_controller``,
``cluster_assignments``, ``cluster_version``) live next to the metadata
store's, created if missing. Rules that make the contract hold:

- Time is the database's (``clock_timestamp()``), never a broker's.
- Every compare-and-set is one conditional ``UPDATE`` (or an upsert with a
  ``WHERE``) or runs under a row lock taken with ``SELECT ... FOR UPDATE``.
- Incarnations come from a sequence and controller epochs from a counter
  column that only grows, so neither repeats.
- Every change raises the single ``cluster_version`` row and sends
  ``NOTIFY tidelake_cluster`` in the same transaction; ``wait_for_change``
  listens on a second connection of its own.
- Locks are taken in one order (controller row, assignment rows by key,
  broker row, version row last), so transactions of this store do not
  deadlock each other; a deadlock or serialization failure (from anything
  else) is retried a few times.

Calls from several threads of one process share one connection, serialised
by a lock; other brokers are isolated by PostgreSQL.
"""

from __future__ import annotations

import json
import select
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ingest.cluster.api import (
    BrokerInfo,
    BrokerLoad,
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
    UnknownPartitionError,
)
from ingest.metadata.errors import MetadataError
from ingest.metadata.postgres import connect_postgres, is_transient

__all__ = ["PostgresClusterStore", "CHANNEL"]

CHANNEL = "tidelake_cluster"
"""The LISTEN/NOTIFY channel every change is announced on."""

_T = TypeVar("_T")

_ATTEMPTS = 5  # tries of one transaction that hit a deadlock / serialization failure
_NOW = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT"

_SCHEMA = """
CREATE SEQUENCE IF NOT EXISTS cluster_incarnation_seq;
CREATE TABLE IF NOT EXISTS cluster_brokers (
    node_id INTEGER PRIMARY KEY,
    incarnation BIGINT NOT NULL,
    host TEXT NOT NULL,
    port INTEGER NOT NULL,
    rack TEXT,
    object_prefix TEXT NOT NULL,
    draining BOOLEAN NOT NULL DEFAULT FALSE,
    expires_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS cluster_controller (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    node_id INTEGER,
    epoch BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL
);
INSERT INTO cluster_controller VALUES (1, NULL, 0, 0) ON CONFLICT (id) DO NOTHING;
CREATE TABLE IF NOT EXISTS cluster_assignments (
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    leader INTEGER NOT NULL,
    leader_epoch INTEGER NOT NULL,
    target INTEGER,
    PRIMARY KEY (topic, partition)
);
CREATE TABLE IF NOT EXISTS cluster_version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    value BIGINT NOT NULL
);
INSERT INTO cluster_version VALUES (1, 0) ON CONFLICT (id) DO NOTHING;
CREATE TABLE IF NOT EXISTS cluster_loads (
    node_id INTEGER PRIMARY KEY,
    incarnation BIGINT NOT NULL,
    reported_ms BIGINT NOT NULL,
    loads TEXT NOT NULL
);
-- every advertised listener of a broker (tables made before listeners were
-- registered gain the column; their rows read as "no listeners")
ALTER TABLE cluster_brokers ADD COLUMN IF NOT EXISTS listeners JSONB;
"""

_BROKER_COLUMNS = (
    "node_id, incarnation, host, port, rack, object_prefix, draining, expires_ms, listeners"
)
_ASSIGNMENT_COLUMNS = "topic, partition, leader, leader_epoch, target"


def _listeners_json(listeners: Sequence[ListenerEndpoint]) -> str:
    return json.dumps([[x.name, x.host, x.port, x.security_protocol] for x in listeners])


def _broker(row: Sequence[Any]) -> BrokerInfo:
    doc = row[8]
    if isinstance(doc, str):  # a driver that leaves JSONB undecoded
        doc = json.loads(doc)
    listeners = tuple(
        ListenerEndpoint(str(name), str(host), int(port), str(protocol))
        for name, host, port, protocol in doc or ()
    )
    return BrokerInfo(
        int(row[0]),
        int(row[1]),
        row[2],
        int(row[3]),
        row[4],
        row[5],
        bool(row[6]),
        int(row[7]),
        listeners,
    )


def _assignment(row: Sequence[Any]) -> PartitionAssignment:
    return PartitionAssignment(
        row[0], int(row[1]), int(row[2]), int(row[3]), None if row[4] is None else int(row[4])
    )


def _bump(cur: Any) -> None:
    """Record one change: raise the version and announce it at commit."""
    cur.execute("UPDATE cluster_version SET value = value + 1 WHERE id = 1 RETURNING value")
    (version,) = cur.fetchone()
    cur.execute("SELECT pg_notify(%s, %s)", (CHANNEL, str(version)))


def _move(cur: Any, topic: str, partition: int, expected_epoch: int, leader: int) -> bool:
    """Compare-and-set the leader, clearing any pending target (a controller's move)."""
    cur.execute(
        "UPDATE cluster_assignments SET leader = %s, leader_epoch = leader_epoch + 1, "
        "target = NULL WHERE topic = %s AND partition = %s AND leader_epoch = %s",
        (leader, topic, partition, expected_epoch),
    )
    return bool(cur.rowcount == 1)


class PostgresClusterStore:
    """A :class:`~ingest.cluster.api.ClusterStore` in PostgreSQL.

    ``url`` is the cluster's ``metadata_url`` (``postgresql://user@host/db``,
    optionally ``?schema=name``, as for the metadata store).
    """

    def __init__(self, url: str) -> None:
        import psycopg2

        self._psycopg2: Any = psycopg2
        self._url = url
        self._lock = threading.Lock()
        self._listen_lock = threading.Lock()
        self._closed = False
        self._conn: Any = None
        self._listener: Any = None
        try:
            self._conn = self._connect()
            with self._conn.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(7435013)")  # one creator at a time
                cur.execute(_SCHEMA)
            self._conn.commit()
            self._listener = self._listen()
        except (psycopg2.Error, MetadataError, ClusterError) as e:
            self._close_connections()
            raise ClusterError(f"cannot open the PostgreSQL cluster store: {e}") from e

    def _connect(self) -> Any:
        try:
            return connect_postgres(self._url)
        except MetadataError as e:
            raise ClusterError(str(e)) from e

    def _listen(self) -> Any:
        conn = self._connect()
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f"LISTEN {CHANNEL}")
        return conn

    # --- transactions -----------------------------------------------------------------
    def _transact(self, fn: Callable[[Any], _T]) -> _T:
        """Run ``fn(cursor)`` as one transaction, retried on a deadlock or a
        serialization failure; a lost connection is reopened on the next call."""
        pg = self._psycopg2
        with self._lock:
            for attempt in range(1, _ATTEMPTS + 1):
                if self._closed:
                    raise ClusterError("the cluster store is closed")
                if self._conn is None or self._conn.closed:
                    try:
                        self._conn = self._connect()
                    except pg.Error as e:
                        raise ClusterError(f"cluster store unreachable: {e}") from e
                conn = self._conn
                try:
                    with conn.cursor() as cur:
                        result = fn(cur)
                    conn.commit()
                    return result
                except pg.Error as e:
                    self._rollback(conn)
                    if is_transient(e) and attempt < _ATTEMPTS:
                        time.sleep(0.005 * attempt)
                        continue
                    raise ClusterError(f"cluster store error: {e}") from e
                except BaseException:
                    self._rollback(conn)
                    raise
            raise AssertionError("unreachable")  # pragma: no cover

    def _rollback(self, conn: Any) -> None:
        try:
            conn.rollback()
        except self._psycopg2.Error:
            conn.close()  # broken: reopened by the next call

    # --- membership ----------------------------------------------------------------
    def register_broker(
        self,
        node_id: int,
        host: str,
        port: int,
        rack: str | None,
        object_prefix: str,
        lease_ms: int,
        listeners: Sequence[ListenerEndpoint] = (),
    ) -> BrokerInfo:
        def tx(cur: Any) -> BrokerInfo:
            # one statement: a new row, or a takeover of an expired incarnation
            # or of one with the same object prefix (a restart); a live holder
            # with another prefix keeps the row and nothing is returned
            cur.execute(
                f"INSERT INTO cluster_brokers ({_BROKER_COLUMNS}) "
                f"VALUES (%s, nextval('cluster_incarnation_seq'), %s, %s, %s, %s, FALSE, "
                f"{_NOW} + %s, %s::jsonb) "
                "ON CONFLICT (node_id) DO UPDATE SET incarnation = excluded.incarnation, "
                "host = excluded.host, port = excluded.port, rack = excluded.rack, "
                "object_prefix = excluded.object_prefix, draining = FALSE, "
                "expires_ms = excluded.expires_ms, listeners = excluded.listeners "
                f"WHERE cluster_brokers.expires_ms <= {_NOW} "
                "OR cluster_brokers.object_prefix = excluded.object_prefix "
                f"RETURNING {_BROKER_COLUMNS}",
                (node_id, host, port, rack, object_prefix, lease_ms, _listeners_json(listeners)),
            )
            row = cur.fetchone()
            if row is None:
                cur.execute(
                    "SELECT incarnation, object_prefix FROM cluster_brokers WHERE node_id = %s",
                    (node_id,),
                )
                held = cur.fetchone()
                raise NodeIdInUseError(
                    f"node id {node_id} is held by a live broker (incarnation {held[0]}, "
                    f"object prefix {held[1]!r})"
                )
            _bump(cur)
            return _broker(row)

        return self._transact(tx)

    def heartbeat(self, node_id: int, incarnation: int, lease_ms: int) -> bool:
        def tx(cur: Any) -> bool:
            cur.execute(
                f"SELECT expires_ms <= {_NOW} FROM cluster_brokers "
                "WHERE node_id = %s AND incarnation = %s FOR UPDATE",
                (node_id, incarnation),
            )
            row = cur.fetchone()
            if row is None:
                return False
            cur.execute(
                f"UPDATE cluster_brokers SET expires_ms = GREATEST(expires_ms, {_NOW} + %s) "
                "WHERE node_id = %s",
                (lease_ms, node_id),
            )
            if row[0]:
                _bump(cur)  # an expired broker came back
            return True

        return self._transact(tx)

    def set_draining(self, node_id: int, incarnation: int, draining: bool) -> None:
        def tx(cur: Any) -> None:
            cur.execute(
                "UPDATE cluster_brokers SET draining = %s WHERE node_id = %s AND incarnation = %s",
                (draining, node_id, incarnation),
            )
            if cur.rowcount:
                _bump(cur)

        self._transact(tx)

    def unregister_broker(self, node_id: int, incarnation: int) -> None:
        def tx(cur: Any) -> None:
            cur.execute(
                "DELETE FROM cluster_brokers WHERE node_id = %s AND incarnation = %s",
                (node_id, incarnation),
            )
            if cur.rowcount:
                _bump(cur)

        self._transact(tx)

    def list_brokers(self) -> list[BrokerInfo]:
        def tx(cur: Any) -> list[BrokerInfo]:
            cur.execute(f"SELECT {_BROKER_COLUMNS} FROM cluster_brokers ORDER BY node_id")
            return [_broker(r) for r in cur.fetchall()]

        return self._transact(tx)

    def now_ms(self) -> int:
        def tx(cur: Any) -> int:
            cur.execute(f"SELECT {_NOW}")
            return int(cur.fetchone()[0])

        return self._transact(tx)

    def report_load(
        self, node_id: int, incarnation: int, loads: Mapping[tuple[str, int], PartitionLoad]
    ) -> bool:
        # one JSON document per broker: [[topic, partition, in_bps, out_bps], ...]
        doc = json.dumps([[t, p, v.in_bps, v.out_bps] for (t, p), v in sorted(loads.items())])

        def tx(cur: Any) -> bool:
            cur.execute(
                "INSERT INTO cluster_loads (node_id, incarnation, reported_ms, loads) "
                f"SELECT node_id, incarnation, {_NOW}, %s FROM cluster_brokers "
                "WHERE node_id = %s AND incarnation = %s "
                "ON CONFLICT (node_id) DO UPDATE SET incarnation = excluded.incarnation, "
                "reported_ms = excluded.reported_ms, loads = excluded.loads",
                (doc, node_id, incarnation),
            )
            return bool(cur.rowcount == 1)

        return self._transact(tx)

    def loads(self) -> dict[int, BrokerLoad]:
        def tx(cur: Any) -> dict[int, BrokerLoad]:
            cur.execute(
                "SELECT l.node_id, l.reported_ms, l.loads FROM cluster_loads l "
                "JOIN cluster_brokers b ON b.node_id = l.node_id "
                "AND b.incarnation = l.incarnation ORDER BY l.node_id"
            )
            out: dict[int, BrokerLoad] = {}
            for node, reported, doc in cur.fetchall():
                parts = {
                    (str(t), int(p)): PartitionLoad(float(i), float(o))
                    for t, p, i, o in json.loads(doc)
                }
                out[int(node)] = BrokerLoad(int(node), int(reported), parts)
            return out

        return self._transact(tx)

    # --- controller -----------------------------------------------------------------
    def acquire_controller(self, node_id: int, lease_ms: int) -> ControllerLease | None:
        def tx(cur: Any) -> ControllerLease | None:
            cur.execute(
                "SELECT node_id, epoch, expires_ms FROM cluster_controller WHERE id = 1 FOR UPDATE"
            )
            held_by, epoch, expires = cur.fetchone()
            cur.execute(f"SELECT {_NOW}")
            now = int(cur.fetchone()[0])
            live = held_by is not None and int(expires) > now
            if live and held_by != node_id:
                return None
            if live:  # renew: same epoch, not a change
                cur.execute(
                    "UPDATE cluster_controller SET expires_ms = GREATEST(expires_ms, %s) "
                    "WHERE id = 1 RETURNING expires_ms",
                    (now + lease_ms,),
                )
                return ControllerLease(node_id, int(epoch), int(cur.fetchone()[0]))
            cur.execute(
                "UPDATE cluster_controller SET node_id = %s, epoch = epoch + 1, expires_ms = %s "
                "WHERE id = 1 RETURNING epoch",
                (node_id, now + lease_ms),
            )
            new_epoch = int(cur.fetchone()[0])
            _bump(cur)
            return ControllerLease(node_id, new_epoch, now + lease_ms)

        return self._transact(tx)

    def controller(self) -> ControllerLease | None:
        def tx(cur: Any) -> ControllerLease | None:
            cur.execute(
                "SELECT node_id, epoch, expires_ms FROM cluster_controller "
                "WHERE id = 1 AND node_id IS NOT NULL"
            )
            row = cur.fetchone()
            return None if row is None else ControllerLease(int(row[0]), int(row[1]), int(row[2]))

        return self._transact(tx)

    def resign_controller(self, node_id: int, epoch: int) -> None:
        def tx(cur: Any) -> None:
            cur.execute(
                "UPDATE cluster_controller SET node_id = NULL, expires_ms = 0 "
                "WHERE id = 1 AND node_id = %s AND epoch = %s",
                (node_id, epoch),
            )
            if cur.rowcount:
                _bump(cur)

        self._transact(tx)

    # --- partition leadership -------------------------------------------------------
    def assignments(self) -> list[PartitionAssignment]:
        def tx(cur: Any) -> list[PartitionAssignment]:
            cur.execute(
                f"SELECT {_ASSIGNMENT_COLUMNS} FROM cluster_assignments ORDER BY topic, partition"
            )
            return [_assignment(r) for r in cur.fetchall()]

        return self._transact(tx)

    def assign_new(self, topic: str, leaders: Sequence[int], first_partition: int = 0) -> None:
        rows = [(topic, first_partition + i, leader) for i, leader in enumerate(leaders)]

        def tx(cur: Any) -> None:
            added = 0
            for row in rows:
                cur.execute(
                    f"INSERT INTO cluster_assignments ({_ASSIGNMENT_COLUMNS}) "
                    "VALUES (%s, %s, %s, 0, NULL) ON CONFLICT (topic, partition) DO NOTHING",
                    row,
                )
                added += cur.rowcount
            if added:
                _bump(cur)

        self._transact(tx)

    def remove_topic(self, topic: str) -> None:
        def tx(cur: Any) -> None:
            cur.execute("DELETE FROM cluster_assignments WHERE topic = %s", (topic,))
            if cur.rowcount:
                _bump(cur)

        self._transact(tx)

    def apply_moves(self, controller_epoch: int, moves: Sequence[Move]) -> int:
        # by key, so two transactions moving the same partitions lock them in one order
        ordered = sorted(moves, key=lambda m: (m.topic, m.partition))

        def tx(cur: Any) -> int:
            # shared lock: a takeover (FOR UPDATE) waits for this commit, and
            # a move waits for a takeover in flight, then sees its epoch
            cur.execute("SELECT node_id, epoch FROM cluster_controller WHERE id = 1 FOR SHARE")
            held_by, epoch = cur.fetchone()
            if held_by is None or int(epoch) != controller_epoch:
                raise ControllerFencedError(
                    f"controller epoch {controller_epoch} is fenced (current: {epoch}"
                    f"{', resigned' if held_by is None else ''})"
                )
            applied = sum(
                _move(cur, m.topic, m.partition, m.expected_epoch, m.leader) for m in ordered
            )
            if applied:
                _bump(cur)
            return applied

        return self._transact(tx)

    def hand_over(
        self,
        topic: str,
        partition: int,
        expected_epoch: int,
        leader: int,
        *,
        carried: int | None = None,
    ) -> bool:
        def tx(cur: Any) -> bool:
            cur.execute(
                "UPDATE cluster_assignments SET leader = %s, leader_epoch = leader_epoch + 1, "
                "target = CASE WHEN target = %s OR target = %s THEN NULL ELSE target END "
                "WHERE topic = %s AND partition = %s AND leader_epoch = %s",
                (leader, leader, carried, topic, partition, expected_epoch),
            )
            moved = bool(cur.rowcount == 1)
            if moved:
                _bump(cur)
            return moved

        return self._transact(tx)

    def request_move(self, topic: str, partition: int, target: int) -> PartitionAssignment:
        def tx(cur: Any) -> PartitionAssignment:
            cur.execute(
                "UPDATE cluster_assignments SET target = %s WHERE topic = %s AND partition = %s "
                f"RETURNING {_ASSIGNMENT_COLUMNS}",
                (target, topic, partition),
            )
            row = cur.fetchone()
            if row is None:
                raise UnknownPartitionError(f"no assignment for {topic}-{partition}")
            _bump(cur)
            return _assignment(row)

        return self._transact(tx)

    # --- change tracking --------------------------------------------------------------
    def version(self) -> int:
        def tx(cur: Any) -> int:
            cur.execute("SELECT value FROM cluster_version WHERE id = 1")
            return int(cur.fetchone()[0])

        return self._transact(tx)

    def wait_for_change(self, timeout_s: float) -> None:
        deadline = time.monotonic() + max(0.0, timeout_s)
        if not self._listen_lock.acquire(timeout=max(0.0, timeout_s)):
            return
        try:
            if self._closed:
                raise ClusterError("the cluster store is closed")
            if self._listener is None or self._listener.closed:
                # changes while no one listened are unknown: report one
                self._listener = self._listen()
                return
            conn = self._listener
            while True:
                conn.poll()
                if conn.notifies:
                    del conn.notifies[:]
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                select.select([conn], [], [], remaining)
        except self._psycopg2.Error as e:
            if self._listener is not None:
                self._listener.close()
            raise ClusterError(f"cluster store: lost the change listener: {e}") from e
        finally:
            if self._closed:  # closed while waiting: the listener is ours to close
                self._close_connections(listener_only=True)
            self._listen_lock.release()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None and not self._conn.closed:
                self._conn.close()
        if self._listen_lock.acquire(blocking=False):  # else the waiter closes it
            try:
                self._close_connections(listener_only=True)
            finally:
                self._listen_lock.release()

    def _close_connections(self, listener_only: bool = False) -> None:
        for conn in (self._listener,) if listener_only else (self._conn, self._listener):
            if conn is not None and not conn.closed:
                conn.close()
