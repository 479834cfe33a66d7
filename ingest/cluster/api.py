"""The contract of cluster control: membership, the controller lease and
partition leadership, shared by every broker of one cluster.

Brokers that share a PostgreSQL ``metadata_url`` and an ``s3://`` object
store form one cluster. Each runs a :class:`ClusterStore` client over the
same database; the store is the only place brokers agree on anything, and it
relies on PostgreSQL's transactions and row locks (no consensus protocol of
our own). Methods are synchronous and each is one transaction; async callers
run them in a worker thread.

Guarantees every implementation keeps (checked by one contract suite):

- **Membership.** ``register_broker`` returns a new *incarnation* (a number
  that grows with every registration of any broker); a broker is live while
  its lease (``expires_ms``) is in the future. ``heartbeat`` extends the
  lease only for the current incarnation of the node id: a process that was
  replaced (a newer registration of the same node id) gets ``False`` and must
  stop serving.
- **Controller.** At most one broker holds the controller lease at a time.
  ``acquire_controller`` takes a free or expired lease (raising the
  controller epoch) or renews the caller's own; everyone else gets ``None``.
  Every assignment change the controller makes carries its epoch and is
  refused with :class:`ControllerFencedError` once a newer epoch exists, so
  a controller that lost its lease (paused, partitioned) changes nothing.
- **Leadership.** Every assigned partition has exactly one leader node and a
  leader epoch that grows by one at every change of leader. Changes are
  compare-and-set on the epoch the caller read: two concurrent moves of one
  partition never both succeed (``apply_moves`` skips the loser,
  ``hand_over`` returns ``False``; callers that must fail raise
  :class:`StaleAssignmentError`).
- ``version()`` grows with every change of brokers, controller or
  assignments, so a broker can poll it cheaply and reload only on change;
  ``wait_for_change`` blocks until the next change instead of polling.
  Lease renewals (a heartbeat of a live broker, the holder renewing the
  controller lease) are not changes: a lease ends by time, which every
  reader sees by comparing ``expires_ms`` with ``now_ms()``.
- **Listeners.** A broker registers every listener it advertises (name,
  host, port, security protocol); ``list_brokers`` returns them as given,
  in the given order, and a re-registration replaces them. ``host`` and
  ``port`` stay the default listener's address.
- **Load.** ``report_load`` replaces a broker's per-partition bytes/s (one
  row per broker) only for its current incarnation; ``loads()`` returns the
  reports of registered brokers' current incarnations. Reports are not
  changes either (they come every few seconds, like heartbeats).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "NO_LEADER",
    "BrokerInfo",
    "ListenerEndpoint",
    "ControllerLease",
    "PartitionAssignment",
    "Move",
    "PartitionLoad",
    "BrokerLoad",
    "ClusterStore",
]

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class ListenerEndpoint:
    """One listener a broker advertises: clients that reached the cluster on
    listener ``name`` are sent to ``host``:``port`` of each broker (Kafka's
    ``advertised.listeners``)."""

    name: str  # e.g. "PLAINTEXT", "SASL_SSL", "INTERNAL"
    host: str
    port: int
    security_protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """One registered broker, as the cluster sees it."""

    node_id: int
    incarnation: int
    host: str
    port: int
    rack: str | None
    object_prefix: str  # where its write-ahead log lives (recovered on failover)
    draining: bool  # asked to hand its partitions away (graceful shutdown)
    expires_ms: int  # lease end, wall clock ms of the store
    # every advertised listener, the default one first; empty for a broker
    # that registered only its default address
    listeners: tuple[ListenerEndpoint, ...] = ()

    def live(self, now_ms: int) -> bool:
        return self.expires_ms > now_ms


@dataclass(frozen=True, slots=True)
class ControllerLease:
    node_id: int
    epoch: int
    expires_ms: int


@dataclass(frozen=True, slots=True)
class PartitionAssignment:
    topic: str
    partition: int
    leader: int  # node id, or NO_LEADER
    leader_epoch: int
    target: int | None = None  # a requested move: the leader hands over to this node


@dataclass(frozen=True, slots=True)
class Move:
    """Set ``topic``-``partition``'s leader to ``leader`` (and clear any
    target) if its epoch is still ``expected_epoch``; the epoch becomes
    ``expected_epoch + 1``. ``leader`` may be ``NO_LEADER``."""

    topic: str
    partition: int
    expected_epoch: int
    leader: int


@dataclass(frozen=True, slots=True)
class PartitionLoad:
    """Record batch bytes/s produced to (``in_bps``) and fetched from
    (``out_bps``) one partition, measured by its leader."""

    in_bps: float
    out_bps: float

    @property
    def total(self) -> float:
        return self.in_bps + self.out_bps


@dataclass(frozen=True, slots=True)
class BrokerLoad:
    """A broker's last load report: the partitions it led, at ``reported_ms``
    (the store's clock)."""

    node_id: int
    reported_ms: int
    partitions: Mapping[tuple[str, int], PartitionLoad]


class ClusterStore(Protocol):
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
        """Register (or re-register, after a restart) ``node_id`` with the
        listeners it advertises (``host``:``port`` is its default listener's
        address); returns its new incarnation. Raises :class:`NodeIdInUseError` if another live
        incarnation holds the node id and ``object_prefix`` differs (two
        processes configured with one node id)."""

    def heartbeat(self, node_id: int, incarnation: int, lease_ms: int) -> bool:
        """Extend the lease; ``False`` if ``incarnation`` is no longer the node's
        current one (or the node was removed): the caller must stop serving.
        A current incarnation whose lease had already expired is live again
        (that counts as a change)."""

    def set_draining(self, node_id: int, incarnation: int, draining: bool) -> None:
        """Mark the node as draining (or not); no effect unless ``incarnation``
        is the node's current one."""

    def unregister_broker(self, node_id: int, incarnation: int) -> None:
        """Remove the node (its current incarnation only)."""

    def list_brokers(self) -> list[BrokerInfo]:
        """Every registered broker, live or expired, by node id."""

    def now_ms(self) -> int:
        """The store's clock (leases are compared against it, never a broker's)."""

    def report_load(
        self, node_id: int, incarnation: int, loads: Mapping[tuple[str, int], PartitionLoad]
    ) -> bool:
        """Replace the node's load report (bytes/s of the partitions it leads);
        ``False`` (nothing stored) if ``incarnation`` is not the node's current one."""

    def loads(self) -> dict[int, BrokerLoad]:
        """The last report of every registered broker's current incarnation, by node id."""

    # --- controller ---------------------------------------------------------------------
    def acquire_controller(self, node_id: int, lease_ms: int) -> ControllerLease | None:
        """Take the lease if free or expired, renew it if ``node_id`` holds it;
        ``None`` if another node holds a live lease.

        Taking a free or expired lease (the caller's own expired one too)
        raises the epoch; renewing a live lease keeps it. Epochs never repeat,
        even after ``resign_controller``."""

    def controller(self) -> ControllerLease | None:
        """The current lease holder (possibly expired), or ``None``."""

    def resign_controller(self, node_id: int, epoch: int) -> None:
        """Give up the lease now (graceful shutdown), if still held at ``epoch``.
        The epoch is fenced from then on: ``apply_moves`` with it raises."""

    # --- partition leadership --------------------------------------------------------------
    def assignments(self) -> list[PartitionAssignment]:
        """Every assigned partition, by topic and partition."""

    def assign_new(self, topic: str, leaders: Sequence[int], first_partition: int = 0) -> None:
        """Assign partitions ``first_partition..`` of a new topic (or new
        partitions of a topic) to ``leaders`` at epoch 0; rows that exist are
        left alone."""

    def remove_topic(self, topic: str) -> None: ...

    def apply_moves(self, controller_epoch: int, moves: Sequence[Move]) -> int:
        """Apply every move whose expected epoch still matches (others are
        skipped); returns how many were applied. Raises
        :class:`ControllerFencedError` if ``controller_epoch`` is not the
        current controller epoch (nothing applied)."""

    def hand_over(
        self,
        topic: str,
        partition: int,
        expected_epoch: int,
        leader: int,
        *,
        carried: int | None = None,
    ) -> bool:
        """The current leader passes leadership on (to its ``target``, after
        flushing): compare-and-set on the epoch, no controller epoch needed.
        ``False`` if the epoch moved on. ``carried`` is the target this
        hand-over carries out, as read with the epoch (a cancellation hands
        over to the leader itself and carries the target it cancels). The
        stored target is cleared if it is ``leader`` or ``carried``; a newer
        one, asked for while the hand-over was under way (an operator's
        reassignment racing a balancing move), stays for the new leader to
        hand over to in turn: the latest request wins."""

    def request_move(self, topic: str, partition: int, target: int) -> PartitionAssignment:
        """Ask the partition's leader to hand over to ``target`` (a reassignment);
        raises :class:`UnknownPartitionError` for an unassigned partition.
        Returns the assignment with the target set."""

    def version(self) -> int:
        """Grows with every change of brokers, controller or assignments (one
        cheap read: poll it and reload only when it moved)."""

    def wait_for_change(self, timeout_s: float) -> None:
        """Block until a change may have happened, through any client of the
        cluster, since this client's previous ``wait_for_change`` returned (or
        since it was opened), or until ``timeout_s`` has passed. Returns at
        once if such a change already happened. It may return early without a
        change (callers compare ``version()`` and wait again); one thread
        waits at a time per client."""

    def close(self) -> None:
        """Release the connection(s); the broker's rows stay (see
        ``unregister_broker``)."""
