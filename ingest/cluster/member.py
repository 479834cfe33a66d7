"""One broker's part in a cluster: membership, leadership, and (on the broker
that holds the lease) the controller.

:class:`ClusterMember` registers the broker in the shared
:class:`~ingest.cluster.api.ClusterStore`, renews its lease, and follows the
store's assignments: it opens the partitions assigned to this broker, closes
those assigned elsewhere, and hands a partition over when the controller
asks for a move (close it here, flushing its stream to object storage, then
pass leadership on with a compare-and-set on the leader epoch). It also
answers the request path's questions (:class:`~ingest.cluster.view.ClusterView`)
from memory.

The controller runs in whichever member holds the controller lease. Each
pass it recovers the write-ahead log of every broker whose lease expired
(so every record that broker acknowledged reaches object storage), removes
its registration (a zombie's next heartbeat fails and it stops), gives its
partitions to live brokers, and balances: by traffic when there is some
(every member reports its partitions' bytes/s, :mod:`ingest.cluster.balancer`
decides), by partition count in an idle cluster.

What the member does to partitions goes through :class:`LeadershipHooks`,
which the broker implements; nothing here touches streams or sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from ingest.cluster.api import (
    NO_LEADER,
    BrokerInfo,
    ClusterStore,
    ListenerEndpoint,
    Move,
    PartitionAssignment,
    PartitionLoad,
)
from ingest.cluster.balancer import (
    BalancerMemory,
    BalancerSettings,
    plan_by_traffic,
)
from ingest.cluster.config import ClusterConfig
from ingest.cluster.errors import ControllerFencedError
from ingest.cluster.pins import PlacementPins
from ingest.cluster.planner import Target, balance_targets, failover_moves, leaders_for_new
from ingest.cluster.view import BrokerEndpoint, hashed_coordinator

__all__ = ["ClusterMember", "LeadershipHooks"]

log = logging.getLogger(__name__)

T = TypeVar("T")
_PARALLEL_CHANGES = 16  # partitions opened or closed at once
_RECOVERY_TIMEOUT_S = 60.0
_TOPIC_REFRESH_S = 5.0  # how stale another broker's topic configs may be here
_LOOP_STALL_S = 10.0  # an event loop stuck this long: stop renewing the lease
_DECISIONS_KEPT = 20  # balancing decisions shown by ``tidelake cluster status``


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and (e := task.exception()) is not None:
        log.warning("cluster view refresh failed: %s", e)


class LeadershipHooks(Protocol):
    async def lead(self, topic: str, partition: int, leader_epoch: int) -> None:
        """Serve the partition here from now on (open its stream)."""

    async def resign(self, topic: str, partition: int) -> None:
        """Stop serving the partition and flush its stream to object storage."""

    def begin_move(self, topic: str, partition: int) -> None:
        """The partition is being handed away: hold its requests until :meth:`end_move`."""

    def end_move(self, topic: str, partition: int) -> None: ...

    async def recover_node(self, broker: BrokerInfo) -> None:
        """Bring every record ``broker`` acknowledged into object storage (replay
        its write-ahead log), fencing it if it still runs."""

    async def topics_changed(self) -> None:
        """Topics were created or deleted by another broker: reload them."""

    def fenced(self, reason: str) -> None:
        """This broker was removed from the cluster: stop serving at once."""

    def traffic(self) -> Mapping[tuple[str, int], tuple[int, int]]:
        """Record batch bytes produced to and fetched from each partition served
        here since it was opened (counters that only grow while it stays open)."""


class ClusterMember:
    def __init__(
        self,
        store: ClusterStore,
        config: ClusterConfig,
        *,
        node_id: int,
        host: str,
        port: int,
        rack: str | None,
        object_prefix: str,
        hooks: LeadershipHooks,
        listeners: Sequence[ListenerEndpoint] = (),
    ) -> None:
        self._store = store
        self._config = config
        self._endpoint = BrokerEndpoint(node_id, host, port, rack, tuple(listeners))
        self._object_prefix = object_prefix
        self._hooks = hooks
        self._incarnation = 0
        self._brokers: list[BrokerInfo] = []
        self._live: tuple[BrokerEndpoint, ...] = (self._endpoint,)
        self._assignments: dict[tuple[str, int], PartitionAssignment] = {}
        self._controller = NO_LEADER
        self._controller_epoch = 0
        self._led: dict[tuple[str, int], int] = {}  # partitions served here -> epoch
        self._version = -1  # the store version last followed (partitions opened, closed)
        self._view_version = -1  # the store version the view above was last read at
        self._followed_topics: set[str] = set()
        self._sync_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._handing: set[tuple[str, int]] = set()  # hand-overs in progress
        # hand-overs made here that a read of the store may not show yet
        self._handed: dict[tuple[str, int], PartitionAssignment] = {}
        self._beat_stop = threading.Event()
        self._beats: threading.Thread | None = None
        self._loop_seen = time.monotonic()
        self._released = asyncio.Event()  # set whenever a partition stops being led here
        self._last_balance = 0.0
        self.moves_applied = 0
        self._balancer_memory = BalancerMemory()
        self._pins = PlacementPins(config.balancer_cooldown_ms)
        self.decisions: deque[dict[str, Any]] = deque(maxlen=_DECISIONS_KEPT)
        self.balancer_moves: Counter[str] = Counter()  # moves asked for, by what decided

    # --- ClusterView -------------------------------------------------------------------
    @property
    def node_id(self) -> int:
        return self._endpoint.node_id

    @property
    def clustered(self) -> bool:
        return True

    def brokers(self) -> Sequence[BrokerEndpoint]:
        return self._live

    def controller_id(self) -> int:
        return self._controller

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        a = self._assignments.get((topic, partition))
        if a is None:
            return NO_LEADER, 0
        return a.leader, a.leader_epoch

    async def catch_up(self, wait_s: float) -> None:
        """Bring this broker's view up to the store now (a client named this
        broker as a leader it does not know it is yet), waiting up to
        ``wait_s`` s; the sync goes on if the wait ends first."""
        task = asyncio.ensure_future(self.sync())
        task.add_done_callback(_log_failure)
        await asyncio.wait({task}, timeout=wait_s)

    def coordinator_for(self, group: str) -> BrokerEndpoint:
        return hashed_coordinator(group, self._live)

    # --- what status pages show ------------------------------------------------------------
    @property
    def incarnation(self) -> int:
        return self._incarnation

    def assignments(self) -> list[PartitionAssignment]:
        return sorted(self._assignments.values(), key=lambda a: (a.topic, a.partition))

    def registered_brokers(self) -> list[BrokerInfo]:
        return list(self._brokers)

    def leads(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self._led

    # --- reassignments (AlterPartitionReassignments, ``tidelake cluster reassign``) --------
    def reassignments(self) -> list[PartitionAssignment]:
        """Moves in flight: assignments whose leader was asked to hand over."""
        return [a for a in self.assignments() if a.target is not None and a.target != a.leader]

    async def eligible_leaders(self) -> set[int]:
        """Brokers that may lead a partition now: live and not draining, read
        from the store (a broker that just joined may not be in this view yet)."""
        brokers = await self._call(self._store.list_brokers)
        now = await self._call(self._store.now_ms)
        return {b.node_id for b in brokers if b.live(now) and not b.draining}

    async def request_move(self, topic: str, partition: int, target: int) -> PartitionAssignment:
        """Ask the leader of ``topic``-``partition`` to hand it over to ``target``
        (any broker may write the request; the leader carries it out when it
        sees the change). Asking for the current leader cancels a move in
        flight. Raises :class:`~ingest.cluster.errors.UnknownPartitionError`
        for an unassigned partition."""
        current = self._assignments.get((topic, partition))
        if current is not None and current.leader == target:
            if current.target is not None:
                await self.cancel_move(topic, partition)
            return self._assignments.get((topic, partition), current)
        moved = await self._call(self._store.request_move, topic, partition, target)
        self._assignments[(topic, partition)] = moved  # the next sync reloads it all
        return moved

    async def cancel_move(self, topic: str, partition: int) -> bool:
        """Cancel the move of ``topic``-``partition`` in flight: its leader keeps
        it (a compare-and-set on the leader epoch, which the leader's own
        hand-over then loses). ``False`` if no move was in flight, or it
        completed first."""
        fresh = await self._call(self._store.assignments)
        a = next((x for x in fresh if (x.topic, x.partition) == (topic, partition)), None)
        if a is None or a.target is None or a.target == a.leader:
            return False
        return await asyncio.to_thread(
            self._store.hand_over, topic, partition, a.leader_epoch, a.leader, carried=a.target
        )

    # --- life cycle -------------------------------------------------------------------------
    async def _call(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.to_thread(fn, *args)

    async def start(self) -> None:
        """Register, take what is assigned here, and start the background loops."""
        c = self._config
        info = await self._call(
            self._store.register_broker,
            self._endpoint.node_id,
            self._endpoint.host,
            self._endpoint.port,
            self._endpoint.rack,
            self._object_prefix,
            c.session_timeout_ms,
            self._endpoint.listeners,
        )
        self._incarnation = info.incarnation
        log.info("joined the cluster as node %d (incarnation %d)", self.node_id, self._incarnation)
        await self.sync()
        self._loop_seen = time.monotonic()
        self._beat_stop.clear()
        self._beats = threading.Thread(
            target=self._heartbeat_thread,
            args=(asyncio.get_running_loop(),),
            name="cluster-heartbeat",
            daemon=True,
        )
        self._beats.start()
        self._tasks = [
            asyncio.create_task(self._liveness_loop(), name="cluster-liveness"),
            asyncio.create_task(self._watch_loop(), name="cluster-watch"),
            asyncio.create_task(self._controller_loop(), name="cluster-controller"),
            asyncio.create_task(self._load_loop(), name="cluster-load"),
        ]

    async def drain(self) -> None:
        """Ask the controller to move every partition led here elsewhere, and
        wait (up to ``drain_timeout_ms``) until none is left."""
        await self._call(self._store.set_draining, self.node_id, self._incarnation, True)
        deadline = time.monotonic() + self._config.drain_timeout_ms / 1000
        others = [b for b in self._live if b.node_id != self.node_id]
        if not others:
            log.info("draining: no other broker to take %d partitions", len(self._led))
            return
        while (self._led or self._handing) and (left := deadline - time.monotonic()) > 0:
            self._released.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._released.wait(), min(left, 1.0))
        if self._led or self._handing:
            log.warning(
                "draining: %d partitions still led here at the deadline",
                len(self._led) + len(self._handing),
            )
        else:
            log.info("drained: every partition moved to another broker")

    async def stop(self) -> None:
        """Stop the loops and give up the controller lease (this broker stays
        registered until :meth:`leave`, or until its lease expires)."""
        self._stopping = True
        self._beat_stop.set()
        if self._beats is not None:
            await asyncio.to_thread(self._beats.join, 5)
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self._controller == self.node_id:
            try:
                await self._call(
                    self._store.resign_controller, self.node_id, self._controller_epoch
                )
            except Exception:  # noqa: BLE001 - the lease expires by itself
                log.warning("could not resign the controller lease", exc_info=True)

    async def leave(self) -> None:
        """Unregister: call once the engine uploaded everything, so no one needs
        to recover this broker's write-ahead log. Without it the lease expires
        and the controller recovers the log before moving anything."""
        try:
            await self._call(self._store.unregister_broker, self.node_id, self._incarnation)
        except Exception:  # noqa: BLE001 - the lease expires by itself
            log.warning("could not leave the cluster cleanly", exc_info=True)

    # --- placement of new partitions (called by the log manager) ------------------------
    async def place(self, topic: str, first_partition: int, count: int) -> None:
        """Give the new partitions of ``topic`` leaders, least loaded first, and
        open the ones that land here before the caller answers its client."""
        now = await self._call(self._store.now_ms)
        brokers = await self._call(self._store.list_brokers)
        assignments = await self._call(self._store.assignments)
        leaders = leaders_for_new(count, brokers, assignments, now)
        await self._call(self._store.assign_new, topic, leaders, first_partition)
        await self.sync()

    async def remove(self, topic: str) -> None:
        await self._call(self._store.remove_topic, topic)
        await self.sync()

    # --- loops ---------------------------------------------------------------------------
    # Heartbeats run on a thread of their own, so a busy event loop (a slow
    # start-up, a burst of work on two cores) does not cost the broker its
    # lease; the loop proves it is alive through ``_loop_seen``, and a loop
    # stuck for longer than ``_LOOP_STALL_S`` stops the renewals, so a hung
    # broker loses its partitions like a dead one.
    async def _liveness_loop(self) -> None:
        interval = self._config.heartbeat_interval_ms / 1000
        while True:
            self._loop_seen = time.monotonic()
            await asyncio.sleep(interval)

    def _heartbeat_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        interval = self._config.heartbeat_interval_ms / 1000
        stall = max(_LOOP_STALL_S, 3 * self._config.session_timeout_ms / 1000)
        while not self._beat_stop.wait(interval):
            if time.monotonic() - self._loop_seen > stall:
                log.error("the event loop has not run for %.0f s: not renewing the lease", stall)
                continue
            try:
                ok = self._store.heartbeat(
                    self.node_id, self._incarnation, self._config.session_timeout_ms
                )
            except Exception:  # noqa: BLE001 - retried at the next beat
                log.warning("cluster heartbeat failed", exc_info=True)
                continue
            if not ok:
                reason = (
                    f"node {self.node_id} incarnation {self._incarnation} was removed from "
                    "the cluster (its lease expired and another broker took its partitions)"
                )
                loop.call_soon_threadsafe(self._hooks.fenced, reason)
                return

    async def _load_loop(self) -> None:
        """Every ``load_report_interval_ms``: the bytes/s of each partition led
        here since the previous sample, published to the store. A partition
        opened (or reopened) since then starts its count at this sample."""
        interval = self._config.load_report_interval_ms / 1000
        before: Mapping[tuple[str, int], tuple[int, int]] = {}
        sampled = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            try:
                now_counts = self._hooks.traffic()
                now = time.monotonic()
                elapsed = max(now - sampled, 1e-3)
                loads: dict[tuple[str, int], PartitionLoad] = {}
                for key, (appended, fetched) in now_counts.items():
                    old = before.get(key)
                    if key not in self._led or old is None:
                        continue
                    if appended < old[0] or fetched < old[1]:
                        continue  # reopened: counted from this sample on
                    loads[key] = PartitionLoad(
                        (appended - old[0]) / elapsed, (fetched - old[1]) / elapsed
                    )
                before, sampled = now_counts, now
                await self._call(self._store.report_load, self.node_id, self._incarnation, loads)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the next report retries
                log.warning("cluster load report failed", exc_info=True)

    async def partition_loads(self) -> dict[tuple[str, int], PartitionLoad]:
        """Every partition's produce and fetch bytes/s as its leader last
        reported it (a partition that moved: its newest report)."""
        reports = await self._call(self._store.loads)
        out: dict[tuple[str, int], PartitionLoad] = {}
        for report in sorted(reports.values(), key=lambda r: r.reported_ms):
            out.update(report.partitions)
        return out

    async def balancer_status(self) -> dict[str, Any]:
        """Bytes/s in and out per broker (their last reports) and the recent
        balancing decisions this broker made as the controller."""
        reports = await self._call(self._store.loads)
        brokers: dict[str, Any] = {}
        for node, report in reports.items():
            brokers[str(node)] = {
                "bytes_in_per_s": sum(p.in_bps for p in report.partitions.values()),
                "bytes_out_per_s": sum(p.out_bps for p in report.partitions.values()),
                "reported_ms": report.reported_ms,
            }
        return {"loads": brokers, "decisions": list(self.decisions)}

    def _balancer_settings(self) -> BalancerSettings:
        c = self._config
        return BalancerSettings(
            margin=c.balancer_margin,
            window_ms=c.balancer_window_ms,
            max_moves=c.balancer_max_moves,
            cooldown_ms=c.balancer_cooldown_ms,
            settle_ms=3 * c.load_report_interval_ms + 1_000,
            min_bytes_per_s=c.balancer_min_bytes_per_s,
        )

    async def _watch_loop(self) -> None:
        last_topics = time.monotonic()
        while True:
            try:
                await self._call(self._store.wait_for_change, 1.0)
                await self.sync()
                if time.monotonic() - last_topics >= _TOPIC_REFRESH_S:
                    # topic config changes made through another broker
                    last_topics = time.monotonic()
                    await self._hooks.topics_changed()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the next change or tick retries
                log.warning("cluster sync failed", exc_info=True)
                await asyncio.sleep(0.5)

    async def sync(self) -> None:
        """Read brokers and assignments; open, close and hand over partitions to match."""
        async with self._sync_lock:
            if self._stopping:
                return  # leaving: take no partition any more
            version = await self._call(self._store.version)
            if version == self._version:
                return
            assignments = await self._read_view(version)
            topics = {a.topic for a in assignments}
            if topics != self._followed_topics:
                await self._hooks.topics_changed()
                self._followed_topics = topics
            await self._follow(assignments)
            self._version = version

    async def refresh_view(self, wait_s: float) -> None:
        """Bring what this broker tells clients (leaders, brokers, controller)
        up to the store as it is now, waiting up to ``wait_s`` s, without
        opening or closing anything (the watch loop does that). Metadata calls
        it first, so a client that was just told NOT_LEADER_OR_FOLLOWER by a
        partition's old leader learns the new one from whichever broker it
        asks, not only from the two that took part in the move."""
        task = asyncio.ensure_future(self._refresh_view())
        task.add_done_callback(_log_failure)
        await asyncio.wait({task}, timeout=wait_s)

    async def _refresh_view(self) -> None:
        version = await self._call(self._store.version)
        if version > self._view_version:
            await self._read_view(version)

    async def _read_view(self, version: int) -> list[PartitionAssignment]:
        """Read brokers, assignments and the controller lease, and make them this
        broker's view unless a read of a later ``version`` was applied first.
        Reads may overlap (the watch loop's sync, Metadata's refreshes), so no
        read takes a partition back to an earlier leader epoch than the one
        this broker made it (a hand-over made here is known before a read shows it)."""
        brokers = await self._call(self._store.list_brokers)
        assignments = await self._call(self._store.assignments)
        lease = await self._call(self._store.controller)
        now = await self._call(self._store.now_ms)
        if version <= self._view_version:
            return assignments
        self._view_version = version
        self._brokers = brokers
        self._live = tuple(
            BrokerEndpoint(b.node_id, b.host, b.port, b.rack, b.listeners)
            for b in brokers
            if b.live(now) or b.node_id == self.node_id
        )
        view: dict[tuple[str, int], PartitionAssignment] = {}
        for a in assignments:
            key = (a.topic, a.partition)
            mine = self._handed.pop(key, None)
            if mine is not None and mine.leader_epoch > a.leader_epoch:
                self._handed[key] = a = mine  # read before the hand-over committed
            view[key] = a
        self._handed = {k: v for k, v in self._handed.items() if k in view}
        self._assignments = view
        self._controller = lease.node_id if lease and lease.expires_ms > now else NO_LEADER
        return assignments

    async def _follow(self, assignments: list[PartitionAssignment]) -> None:
        me = self.node_id
        gate = asyncio.Semaphore(_PARALLEL_CHANGES)
        current = {(a.topic, a.partition) for a in assignments}

        async def change(coro: Awaitable[None]) -> None:
            async with gate:
                await coro

        work: list[Awaitable[None]] = []
        for a in assignments:
            key = (a.topic, a.partition)
            if a.leader == me and a.target is not None and a.target != me:
                work.append(change(self._hand_over(a)))
            elif a.leader == me and self._led.get(key) != a.leader_epoch:
                work.append(change(self._lead(a)))
            elif a.leader != me and key in self._led:
                work.append(change(self._resign(key)))
        for key in [k for k in self._led if k not in current]:
            work.append(change(self._resign(key)))
        if work:
            await asyncio.gather(*work)

    async def _lead(self, a: PartitionAssignment) -> None:
        try:
            await self._hooks.lead(a.topic, a.partition, a.leader_epoch)
        except Exception:  # noqa: BLE001 - retried at the next change
            log.exception("cannot take leadership of %s-%d", a.topic, a.partition)
            self._version = -1
            return
        self._led[(a.topic, a.partition)] = a.leader_epoch
        log.info("leading %s-%d at epoch %d", a.topic, a.partition, a.leader_epoch)

    async def _resign(self, key: tuple[str, int]) -> None:
        self._led.pop(key, None)
        self._released.set()
        try:
            await self._hooks.resign(*key)
        except Exception:  # noqa: BLE001 - the stream's owner check fences us anyway
            log.exception("error closing %s-%d", *key)

    async def _hand_over(self, a: PartitionAssignment) -> None:
        key = (a.topic, a.partition)
        assert a.target is not None
        started = time.monotonic()
        self._led.pop(key, None)
        self._handing.add(key)
        # Requests for the partition wait while it is flushed and handed over,
        # then get one NOT_LEADER_OR_FOLLOWER with this broker's view already
        # naming the new leader.
        self._hooks.begin_move(a.topic, a.partition)
        try:
            try:
                await self._hooks.resign(a.topic, a.partition)
            except Exception:  # noqa: BLE001 - not flushed: keep leading, retry later
                log.exception("cannot hand %s-%d over; keeping it", a.topic, a.partition)
                await self._lead(a)
                return
            moved = await asyncio.to_thread(
                self._store.hand_over,
                a.topic,
                a.partition,
                a.leader_epoch,
                a.target,
                carried=a.target,
            )
            if moved:
                self._assignments[key] = self._handed[key] = PartitionAssignment(
                    a.topic, a.partition, a.target, a.leader_epoch + 1
                )
        finally:
            self._handing.discard(key)
            self._hooks.end_move(a.topic, a.partition)
        self._released.set()
        if moved:
            log.info(
                "handed %s-%d to node %d in %.0f ms",
                a.topic,
                a.partition,
                a.target,
                (time.monotonic() - started) * 1000,
            )
        else:
            self._version = -1  # the epoch moved on: look again

    # --- controller -----------------------------------------------------------------------
    async def _controller_loop(self) -> None:
        """Renew (or try to take) the controller lease every tick, and run the
        controller's passes in a task of their own: a long pass (recovering a
        dead broker's log) never lets the lease lapse, and losing the lease
        cancels the pass."""
        c = self._config
        passes: asyncio.Task[None] | None = None
        try:
            while True:
                await asyncio.sleep(c.controller_interval_ms / 1000)
                try:
                    lease = await self._call(
                        self._store.acquire_controller, self.node_id, c.controller_lease_ms
                    )
                except Exception:  # noqa: BLE001 - next tick retries
                    log.warning("controller lease renewal failed", exc_info=True)
                    continue
                if lease is None or lease.epoch != self._controller_epoch:
                    if passes is not None and not passes.done():
                        passes.cancel()
                    if lease is None:
                        if self._controller_epoch:
                            log.info("lost the controller lease")
                        self._controller_epoch = 0
                        continue
                    log.info("this broker is the controller (epoch %d)", lease.epoch)
                    self._controller_epoch = lease.epoch
                    self._controller = self.node_id
                if passes is None or passes.done():
                    passes = asyncio.create_task(self._control(lease.epoch))
        finally:
            if passes is not None:
                passes.cancel()

    async def _control(self, epoch: int) -> None:
        try:
            await self.control_once(epoch)
        except ControllerFencedError:
            log.info("controller epoch %d was superseded", epoch)
        except Exception:  # noqa: BLE001 - the next pass retries
            log.warning("controller pass failed", exc_info=True)

    async def _still_expired(self, b: BrokerInfo) -> bool:
        """Re-read just before recovering: replaying the log of a broker that
        restarted meanwhile would fence its new engine."""
        now = await self._call(self._store.now_ms)
        current = {x.node_id: x for x in await self._call(self._store.list_brokers)}
        again = current.get(b.node_id)
        return again is not None and again.incarnation == b.incarnation and not again.live(now)

    async def control_once(self, epoch: int) -> None:
        """One controller pass at controller epoch ``epoch``."""
        brokers = await self._call(self._store.list_brokers)
        now = await self._call(self._store.now_ms)
        for b in brokers:
            if b.live(now) or b.node_id == self.node_id:
                continue
            if not await self._still_expired(b):
                continue  # it came back (a heartbeat, or a restart as a new incarnation)
            started = time.monotonic()
            log.warning("node %d missed its heartbeats: recovering its write-ahead log", b.node_id)
            await asyncio.wait_for(self._hooks.recover_node(b), _RECOVERY_TIMEOUT_S)
            await self._call(self._store.unregister_broker, b.node_id, b.incarnation)
            log.warning(
                "node %d recovered in %.0f ms; moving its partitions",
                b.node_id,
                (time.monotonic() - started) * 1000,
            )
        brokers = await self._call(self._store.list_brokers)
        assignments = await self._call(self._store.assignments)
        now = await self._call(self._store.now_ms)
        pinned = self._pins.observe(assignments, now)
        registered = {b.node_id for b in brokers}
        gone = {a.leader for a in assignments if a.leader not in registered}
        moves = failover_moves(brokers, assignments, now, recovered=gone)
        live = {b.node_id for b in brokers if b.live(now)}
        moves += [  # a move towards a broker that went away: cancel it
            Move(a.topic, a.partition, a.leader_epoch, a.leader)
            for a in assignments
            if a.target is not None and a.target not in live and a.leader in live
        ]
        if moves:
            for m in moves:
                self._pins.own(m.topic, m.partition)
            applied = await self._call(self._store.apply_moves, epoch, moves)
            self.moves_applied += applied
            log.info("controller: %d of %d leadership moves applied", applied, len(moves))
            return
        c = self._config
        draining = any(b.draining and b.live(now) for b in brokers)
        due = time.monotonic() - self._last_balance >= c.balance_interval_ms / 1000
        if not (draining or (c.balancer and due)):
            return
        self._last_balance = time.monotonic()
        by_traffic = False
        targets: list[Target] = []
        if c.balancer and not draining:
            reports = await self._call(self._store.loads)
            plan = plan_by_traffic(
                brokers, assignments, reports, self._balancer_memory, now, self._balancer_settings()
            )
            self._balancer_memory = plan.memory
            by_traffic = plan.active
            targets = plan.targets
        if draining or not by_traffic:
            targets = balance_targets(
                brokers,
                assignments,
                now,
                c.max_moves_in_flight,
                even_counts=c.balancer,
                pinned=frozenset(pinned),
            )
        leaders = {(a.topic, a.partition): a.leader for a in assignments}
        for t in targets:
            reason = (
                t.reason
                if by_traffic
                else f"{t.reason}: moving {t.topic}-{t.partition} to node {t.target}"
            )
            log.info("controller: %s", reason)
            self._pins.own(t.topic, t.partition)
            await self._call(self._store.request_move, t.topic, t.partition, t.target)
            self.balancer_moves["traffic" if by_traffic else "count"] += 1
            self.decisions.append(
                {
                    "at_ms": now,
                    "topic": t.topic,
                    "partition": t.partition,
                    "from": leaders.get((t.topic, t.partition), NO_LEADER),
                    "to": t.target,
                    "by": "traffic" if by_traffic else "count",
                    "reason": reason,
                }
            )
