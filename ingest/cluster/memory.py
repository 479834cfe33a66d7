"""Cluster control held in process memory (unit tests, a single process).

:class:`MemoryClusterStore` keeps the whole cluster state in one object
guarded by one lock, so every call is atomic. Several clients of one state
(as several brokers would each hold a connection) come from :meth:`peer`;
each has its own ``wait_for_change`` position. The clock is injectable so
tests can expire leases without sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

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

__all__ = ["MemoryClusterStore"]


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class _ClusterState:
    """Everything the clients of one in-memory cluster share."""

    def __init__(self, now_ms: Callable[[], int]) -> None:
        self.now_ms = now_ms
        self.changed = threading.Condition(threading.Lock())  # guards every field
        self.brokers: dict[int, BrokerInfo] = {}
        self.incarnations = 0
        self.controller: ControllerLease | None = None
        self.controller_epoch = 0  # the last epoch handed out (never reused)
        self.assignments: dict[tuple[str, int], PartitionAssignment] = {}
        self.version = 0
        self.loads: dict[int, tuple[int, BrokerLoad]] = {}  # node -> (incarnation, report)

    def bump(self) -> None:
        """Record one change and wake every waiter (call with the lock held)."""
        self.version += 1
        self.changed.notify_all()


class MemoryClusterStore:
    """A :class:`~ingest.cluster.api.ClusterStore` in process memory.

    ``now_ms`` is the store's clock (wall clock milliseconds by default); a
    test passes its own to move time by hand.
    """

    def __init__(self, now_ms: Callable[[], int] | None = None) -> None:
        self._state = _ClusterState(now_ms or _wall_clock_ms)
        self._seen = 0
        self._closed = False

    def peer(self) -> MemoryClusterStore:
        """Another client of the same cluster state (as a second broker's
        connection): changes made through either are seen by both."""
        other = MemoryClusterStore.__new__(MemoryClusterStore)
        other._state = self._state
        with self._state.changed:
            other._seen = self._state.version
        other._closed = False
        return other

    def _check_open(self) -> None:
        if self._closed:
            raise ClusterError("the cluster store is closed")

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
        st = self._state
        with st.changed:
            self._check_open()
            now = st.now_ms()
            old = st.brokers.get(node_id)
            if old is not None and old.live(now) and old.object_prefix != object_prefix:
                raise NodeIdInUseError(
                    f"node id {node_id} is held by a live broker (incarnation "
                    f"{old.incarnation}, object prefix {old.object_prefix!r})"
                )
            st.incarnations += 1
            info = BrokerInfo(
                node_id,
                st.incarnations,
                host,
                port,
                rack,
                object_prefix,
                False,
                now + lease_ms,
                tuple(listeners),
            )
            st.brokers[node_id] = info
            st.bump()
            return info

    def heartbeat(self, node_id: int, incarnation: int, lease_ms: int) -> bool:
        st = self._state
        with st.changed:
            self._check_open()
            info = st.brokers.get(node_id)
            if info is None or info.incarnation != incarnation:
                return False
            now = st.now_ms()
            st.brokers[node_id] = replace(info, expires_ms=max(info.expires_ms, now + lease_ms))
            if not info.live(now):
                st.bump()  # an expired broker came back
            return True

    def set_draining(self, node_id: int, incarnation: int, draining: bool) -> None:
        st = self._state
        with st.changed:
            self._check_open()
            info = st.brokers.get(node_id)
            if info is not None and info.incarnation == incarnation:
                st.brokers[node_id] = replace(info, draining=draining)
                st.bump()

    def unregister_broker(self, node_id: int, incarnation: int) -> None:
        st = self._state
        with st.changed:
            self._check_open()
            info = st.brokers.get(node_id)
            if info is not None and info.incarnation == incarnation:
                del st.brokers[node_id]
                st.loads.pop(node_id, None)
                st.bump()

    def list_brokers(self) -> list[BrokerInfo]:
        st = self._state
        with st.changed:
            self._check_open()
            return [st.brokers[k] for k in sorted(st.brokers)]

    def now_ms(self) -> int:
        return self._state.now_ms()

    def report_load(
        self, node_id: int, incarnation: int, loads: Mapping[tuple[str, int], PartitionLoad]
    ) -> bool:
        st = self._state
        with st.changed:
            self._check_open()
            info = st.brokers.get(node_id)
            if info is None or info.incarnation != incarnation:
                return False
            st.loads[node_id] = (incarnation, BrokerLoad(node_id, st.now_ms(), dict(loads)))
            return True

    def loads(self) -> dict[int, BrokerLoad]:
        st = self._state
        with st.changed:
            self._check_open()
            return {
                node: report
                for node, (incarnation, report) in sorted(st.loads.items())
                if node in st.brokers and st.brokers[node].incarnation == incarnation
            }

    # --- controller -----------------------------------------------------------------
    def acquire_controller(self, node_id: int, lease_ms: int) -> ControllerLease | None:
        st = self._state
        with st.changed:
            self._check_open()
            now = st.now_ms()
            held = st.controller
            if held is not None and held.expires_ms > now:
                if held.node_id != node_id:
                    return None
                st.controller = replace(held, expires_ms=max(held.expires_ms, now + lease_ms))
                return st.controller
            st.controller_epoch += 1
            st.controller = ControllerLease(node_id, st.controller_epoch, now + lease_ms)
            st.bump()
            return st.controller

    def controller(self) -> ControllerLease | None:
        st = self._state
        with st.changed:
            self._check_open()
            return st.controller

    def resign_controller(self, node_id: int, epoch: int) -> None:
        st = self._state
        with st.changed:
            self._check_open()
            held = st.controller
            if held is not None and held.node_id == node_id and held.epoch == epoch:
                st.controller = None
                st.bump()

    # --- partition leadership -------------------------------------------------------
    def assignments(self) -> list[PartitionAssignment]:
        st = self._state
        with st.changed:
            self._check_open()
            return [st.assignments[k] for k in sorted(st.assignments)]

    def assign_new(self, topic: str, leaders: Sequence[int], first_partition: int = 0) -> None:
        st = self._state
        with st.changed:
            self._check_open()
            added = False
            for i, leader in enumerate(leaders):
                key = (topic, first_partition + i)
                if key not in st.assignments:
                    st.assignments[key] = PartitionAssignment(topic, key[1], leader, 0)
                    added = True
            if added:
                st.bump()

    def remove_topic(self, topic: str) -> None:
        st = self._state
        with st.changed:
            self._check_open()
            keys = [k for k in st.assignments if k[0] == topic]
            for k in keys:
                del st.assignments[k]
            if keys:
                st.bump()

    def apply_moves(self, controller_epoch: int, moves: Sequence[Move]) -> int:
        st = self._state
        with st.changed:
            self._check_open()
            held = st.controller
            if held is None or held.epoch != controller_epoch:
                raise ControllerFencedError(
                    f"controller epoch {controller_epoch} is fenced (current: "
                    f"{'none' if held is None else held.epoch})"
                )
            applied = sum(
                self._move(m.topic, m.partition, m.expected_epoch, m.leader, None) for m in moves
            )
            if applied:
                st.bump()
            return applied

    def hand_over(
        self,
        topic: str,
        partition: int,
        expected_epoch: int,
        leader: int,
        *,
        carried: int | None = None,
    ) -> bool:
        st = self._state
        with st.changed:
            self._check_open()
            moved = self._move(topic, partition, expected_epoch, leader, (leader, carried))
            if moved:
                st.bump()
            return moved

    def _move(
        self,
        topic: str,
        partition: int,
        expected_epoch: int,
        leader: int,
        cleared: tuple[int, int | None] | None,
    ) -> bool:
        """Compare-and-set one partition's leader (call with the lock held);
        the pending target is cleared, or with ``cleared`` only if it is one
        of those (see :meth:`hand_over`)."""
        assignments = self._state.assignments
        cur = assignments.get((topic, partition))
        if cur is None or cur.leader_epoch != expected_epoch:
            return False
        target = None if cleared is None or cur.target in cleared else cur.target
        assignments[(topic, partition)] = PartitionAssignment(
            topic, partition, leader, expected_epoch + 1, target
        )
        return True

    def request_move(self, topic: str, partition: int, target: int) -> PartitionAssignment:
        st = self._state
        with st.changed:
            self._check_open()
            cur = st.assignments.get((topic, partition))
            if cur is None:
                raise UnknownPartitionError(f"no assignment for {topic}-{partition}")
            new = replace(cur, target=target)
            st.assignments[(topic, partition)] = new
            st.bump()
            return new

    # --- change tracking --------------------------------------------------------------
    def version(self) -> int:
        st = self._state
        with st.changed:
            self._check_open()
            return st.version

    def wait_for_change(self, timeout_s: float) -> None:
        st = self._state
        with st.changed:
            self._check_open()
            st.changed.wait_for(lambda: st.version != self._seen, timeout=max(0.0, timeout_s))
            self._seen = st.version

    def close(self) -> None:
        with self._state.changed:
            self._closed = True
