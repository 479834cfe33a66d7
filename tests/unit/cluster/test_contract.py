"""One contract suite over every ClusterStore implementation (memory, PostgreSQL)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ingest.cluster import (
    NO_LEADER,
    ClusterError,
    ClusterStore,
    ControllerFencedError,
    MemoryClusterStore,
    Move,
    NodeIdInUseError,
    PartitionAssignment,
    UnknownPartitionError,
    open_cluster_store,
)
from ingest.cluster.postgres import PostgresClusterStore
from ingest.errors import ConfigError
from tests.support.postgres import temporary_database

LONG = 60_000  # a lease that does not end during a test
SHORT = 500  # a lease a test lets expire (long enough to be live until then)


class Cluster:
    """One cluster under test: a first client, more clients on demand, and time."""

    def __init__(self, kind: str, url: str | None = None) -> None:
        self.kind = kind
        self.url = url
        self.clock = [1_000_000]
        self._clients: list[ClusterStore] = []
        if kind == "memory":
            self.store: ClusterStore = MemoryClusterStore(lambda: self.clock[0])
        else:
            assert url is not None
            self.store = PostgresClusterStore(url)
        self._clients.append(self.store)

    def client(self) -> ClusterStore:
        """Another client of the same cluster (PostgreSQL: its own connections)."""
        c: ClusterStore
        if isinstance(self.store, MemoryClusterStore):
            c = self.store.peer()
        else:
            assert self.url is not None
            c = PostgresClusterStore(self.url)
        self._clients.append(c)
        return c

    def let_pass(self, ms: int) -> None:
        """Let ``ms`` of the store's time pass."""
        if self.kind == "memory":
            self.clock[0] += ms
        else:
            time.sleep(ms / 1000)

    def close(self) -> None:
        for c in self._clients:
            c.close()


@pytest.fixture(params=["memory", "postgres"])
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    if request.param == "memory":
        c = Cluster("memory")
        yield c
        c.close()
        return
    with temporary_database("tl_cluster") as url:
        c = Cluster("postgres", url)
        try:
            yield c
        finally:
            c.close()


def _run_together(*fns: Callable[[], Any]) -> list[Any]:
    """Run each function in its own thread, released at once; their results in order."""
    barrier = threading.Barrier(len(fns))
    results: list[Any] = [None] * len(fns)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = fns[i]()
        except BaseException as e:  # noqa: BLE001 - returned to the test
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def _register(store: ClusterStore, node_id: int, lease_ms: int = LONG, prefix: str = "") -> int:
    info = store.register_broker(
        node_id, f"h{node_id}", 9000 + node_id, "r1", prefix or f"wal/{node_id}/", lease_ms
    )
    return info.incarnation


def _by_key(store: ClusterStore) -> dict[tuple[str, int], PartitionAssignment]:
    return {(a.topic, a.partition): a for a in store.assignments()}


# --- membership ------------------------------------------------------------------------
def test_registration_returns_growing_incarnations_and_lists_brokers(cluster: Cluster) -> None:
    s = cluster.store
    before = s.now_ms()
    i2 = _register(s, 2)
    i1 = _register(s, 1)
    i2b = _register(s, 2)  # a restart of node 2
    assert i2 < i1 < i2b
    brokers = s.list_brokers()
    assert [(b.node_id, b.incarnation) for b in brokers] == [(1, i1), (2, i2b)]
    b1 = brokers[0]
    assert (b1.host, b1.port, b1.rack, b1.object_prefix, b1.draining) == (
        "h1",
        9001,
        "r1",
        "wal/1/",
        False,
    )
    assert before + LONG <= b1.expires_ms <= s.now_ms() + LONG
    assert b1.live(s.now_ms())


def test_rack_may_be_none(cluster: Cluster) -> None:
    cluster.store.register_broker(1, "h", 1, None, "wal/1/", LONG)
    assert cluster.store.list_brokers()[0].rack is None


def test_heartbeat_of_a_replaced_incarnation_is_false(cluster: Cluster) -> None:
    s = cluster.store
    old = _register(s, 1)
    new = _register(s, 1)  # same object prefix: a restart, allowed while old is live
    assert new > old
    assert s.heartbeat(1, old, LONG) is False
    assert s.heartbeat(1, new, LONG) is True
    assert s.heartbeat(7, 1, LONG) is False  # never registered
    s.unregister_broker(1, new)
    assert s.heartbeat(1, new, LONG) is False  # removed
    assert s.list_brokers() == []


def test_heartbeat_extends_the_lease(cluster: Cluster) -> None:
    s = cluster.store
    inc = _register(s, 1, lease_ms=SHORT)
    first = s.list_brokers()[0].expires_ms
    assert s.heartbeat(1, inc, LONG)
    assert s.list_brokers()[0].expires_ms >= first + LONG - SHORT


def test_a_lease_expires_unless_renewed(cluster: Cluster) -> None:
    s = cluster.store
    inc = _register(s, 1, lease_ms=SHORT)
    _register(s, 2, lease_ms=LONG)
    assert all(b.live(s.now_ms()) for b in s.list_brokers())
    cluster.let_pass(SHORT + 100)
    now = s.now_ms()
    assert [b.node_id for b in s.list_brokers() if b.live(now)] == [2]
    assert [b.node_id for b in s.list_brokers()] == [1, 2]  # expired ones are listed
    # the current incarnation may come back; that is a change
    v = s.version()
    assert s.heartbeat(1, inc, LONG)
    assert s.version() > v
    assert all(b.live(s.now_ms()) for b in s.list_brokers())


def test_a_live_node_id_with_another_object_prefix_is_in_use(cluster: Cluster) -> None:
    s = cluster.store
    inc = _register(s, 1, lease_ms=SHORT, prefix="wal/a/")
    with pytest.raises(NodeIdInUseError):
        _register(s, 1, prefix="wal/b/")
    assert [(b.incarnation, b.object_prefix) for b in s.list_brokers()] == [(inc, "wal/a/")]
    cluster.let_pass(SHORT + 100)  # once expired, the id is free again
    other = _register(s, 1, prefix="wal/b/")
    assert other > inc
    assert [b.object_prefix for b in s.list_brokers()] == ["wal/b/"]
    assert s.heartbeat(1, inc, LONG) is False


def test_draining_is_set_for_the_current_incarnation_only(cluster: Cluster) -> None:
    s = cluster.store
    old = _register(s, 1)
    new = _register(s, 1)
    s.set_draining(1, old, True)
    assert not s.list_brokers()[0].draining
    s.set_draining(1, new, True)
    assert s.list_brokers()[0].draining
    s.set_draining(1, new, False)
    assert not s.list_brokers()[0].draining
    s.set_draining(1, new, True)
    _register(s, 1)  # a new process starts undrained
    assert not s.list_brokers()[0].draining


def test_unregister_removes_only_the_current_incarnation(cluster: Cluster) -> None:
    s = cluster.store
    old = _register(s, 1)
    new = _register(s, 1)
    s.unregister_broker(1, old)
    assert [b.incarnation for b in s.list_brokers()] == [new]
    s.unregister_broker(1, new)
    assert s.list_brokers() == []


def test_incarnations_never_repeat_across_clients(cluster: Cluster) -> None:
    clients = [cluster.client() for _ in range(3)]

    def work(c: ClusterStore, node: int) -> list[int]:
        return [_register(c, node) for _ in range(10)]

    out = _run_together(*(lambda c=c, n=n: work(c, n) for n, c in enumerate(clients)))
    flat = [i for batch in out for i in batch]
    assert len(set(flat)) == 30
    assert all(batch == sorted(batch) for batch in out)


# --- controller -----------------------------------------------------------------------
def test_one_controller_the_holder_renews_others_get_none(cluster: Cluster) -> None:
    s = cluster.store
    assert s.controller() is None
    lease = s.acquire_controller(1, LONG)
    assert lease is not None and lease.node_id == 1
    assert s.acquire_controller(2, LONG) is None
    again = s.acquire_controller(1, LONG)
    assert again is not None and again.epoch == lease.epoch
    assert again.expires_ms >= lease.expires_ms
    assert s.controller() == again


def test_exactly_one_controller_under_concurrent_acquire(cluster: Cluster) -> None:
    clients = [cluster.client() for _ in range(6)]
    results = _run_together(
        *(lambda c=c, n=n: c.acquire_controller(n, LONG) for n, c in enumerate(clients))
    )
    assert not any(isinstance(r, BaseException) for r in results), results
    won = [r for r in results if r is not None]
    assert len(won) == 1
    assert cluster.store.controller() == won[0]


def test_an_expired_controller_lease_is_taken_over_with_a_higher_epoch(cluster: Cluster) -> None:
    s = cluster.store
    first = s.acquire_controller(1, SHORT)
    assert first is not None
    assert s.acquire_controller(2, LONG) is None
    cluster.let_pass(SHORT + 100)
    second = s.acquire_controller(2, LONG)
    assert second is not None and second.node_id == 2 and second.epoch > first.epoch
    assert s.acquire_controller(1, LONG) is None  # the old holder is out
    ctl = s.controller()
    assert ctl is not None and (ctl.node_id, ctl.epoch) == (2, second.epoch)


def test_the_holder_retaking_its_own_expired_lease_gets_a_new_epoch(cluster: Cluster) -> None:
    s = cluster.store
    first = s.acquire_controller(1, SHORT)
    assert first is not None
    cluster.let_pass(SHORT + 100)
    again = s.acquire_controller(1, LONG)
    assert again is not None and again.epoch > first.epoch


def test_resign_frees_the_lease_fences_its_epoch_and_epochs_never_repeat(
    cluster: Cluster,
) -> None:
    s = cluster.store
    s.assign_new("t", [1])
    lease = s.acquire_controller(1, LONG)
    assert lease is not None
    s.resign_controller(1, lease.epoch + 1)  # not the held epoch: no effect
    assert s.controller() == lease
    s.resign_controller(1, lease.epoch)
    assert s.controller() is None
    with pytest.raises(ControllerFencedError):
        s.apply_moves(lease.epoch, [Move("t", 0, 0, 2)])
    nxt = s.acquire_controller(2, LONG)
    assert nxt is not None and nxt.epoch > lease.epoch


def test_a_stale_controller_epoch_applies_nothing(cluster: Cluster) -> None:
    s = cluster.store
    s.assign_new("t", [1, 2])
    old = s.acquire_controller(1, SHORT)
    assert old is not None
    cluster.let_pass(SHORT + 100)
    new = s.acquire_controller(2, LONG)
    assert new is not None
    before, version = s.assignments(), s.version()
    with pytest.raises(ControllerFencedError):
        s.apply_moves(old.epoch, [Move("t", 0, 0, 2), Move("t", 1, 0, 1)])
    with pytest.raises(ControllerFencedError):
        s.apply_moves(new.epoch + 1, [Move("t", 0, 0, 2)])  # an epoch never handed out
    assert s.assignments() == before
    assert s.version() == version
    assert s.apply_moves(new.epoch, [Move("t", 0, 0, 2)]) == 1


def test_no_controller_yet_fences_every_epoch(cluster: Cluster) -> None:
    cluster.store.assign_new("t", [1])
    with pytest.raises(ControllerFencedError):
        cluster.store.apply_moves(0, [Move("t", 0, 0, 2)])


# --- partition leadership ---------------------------------------------------------------
def test_assign_new_assigns_at_epoch_zero_and_leaves_existing_rows(cluster: Cluster) -> None:
    s = cluster.store
    s.assign_new("t", [1, 2])
    lease = s.acquire_controller(1, LONG)
    assert lease is not None
    s.apply_moves(lease.epoch, [Move("t", 0, 0, 2)])
    s.assign_new("t", [3, 3, 3])  # partitions 0 and 1 exist: untouched
    s.assign_new("t", [4], first_partition=3)
    s.assign_new("a", [NO_LEADER])
    assert s.assignments() == [
        PartitionAssignment("a", 0, NO_LEADER, 0),
        PartitionAssignment("t", 0, 2, 1),
        PartitionAssignment("t", 1, 2, 0),
        PartitionAssignment("t", 2, 3, 0),
        PartitionAssignment("t", 3, 4, 0),
    ]


def test_remove_topic_removes_only_its_partitions(cluster: Cluster) -> None:
    s = cluster.store
    s.assign_new("t", [1, 2])
    s.assign_new("u", [1])
    s.remove_topic("t")
    assert [(a.topic, a.partition) for a in s.assignments()] == [("u", 0)]
    s.remove_topic("missing")
    s.assign_new("t", [3])  # a topic of the same name starts afresh
    assert _by_key(s)[("t", 0)] == PartitionAssignment("t", 0, 3, 0)


def test_apply_moves_applies_matching_epochs_and_skips_stale_ones(cluster: Cluster) -> None:
    s = cluster.store
    s.assign_new("t", [1, 1, 1])
    lease = s.acquire_controller(1, LONG)
    assert lease is not None
    s.request_move("t", 0, 3)
    n = s.apply_moves(
        lease.epoch,
        [
            Move("t", 0, 0, 2),
            Move("t", 1, 5, 2),  # stale expected epoch: skipped
            Move("t", 2, 0, NO_LEADER),
            Move("t", 9, 0, 2),  # unassigned: skipped
        ],
    )
    assert n == 2
    rows = _by_key(s)
    assert rows[("t", 0)] == PartitionAssignment("t", 0, 2, 1, None)  # target cleared
    assert rows[("t", 1)] == PartitionAssignment("t", 1, 1, 0)
    assert rows[("t", 2)] == PartitionAssignment("t", 2, NO_LEADER, 1)
    # the same move again: the epoch moved on
    assert s.apply_moves(lease.epoch, [Move("t", 0, 0, 3)]) == 0
    assert s.apply_moves(lease.epoch, [Move("t", 0, 1, 3), Move("t", 0, 1, 1)]) == 1
    assert _by_key(s)[("t", 0)] == PartitionAssignment("t", 0, 3, 2)


def test_two_concurrent_moves_of_one_partition_never_both_succeed(cluster: Cluster) -> None:
    s = cluster.store
    partitions = 8
    s.assign_new("t", [1] * partitions)
    lease = s.acquire_controller(1, LONG)
    assert lease is not None
    a, b, c = cluster.client(), cluster.client(), cluster.client()
    for p in range(partitions):
        results = _run_together(
            lambda p=p: a.apply_moves(lease.epoch, [Move("t", p, 0, 2)]),
            lambda p=p: b.hand_over("t", p, 0, 3),
            lambda p=p: c.hand_over("t", p, 0, 4),
        )
        assert not any(isinstance(r, BaseException) for r in results), results
        wins = [results[0] == 1, results[1] is True, results[2] is True]
        assert wins.count(True) == 1, results
        row = _by_key(s)[("t", p)]
        assert row.leader_epoch == 1
        assert row.leader == [2, 3, 4][wins.index(True)]


def test_hand_over_is_compare_and_set_on_the_leader_epoch(cluster: Cluster) -> None:
    s = cluster.store
    s.assign_new("t", [1])
    assert s.hand_over("t", 0, 0, 2) is True
    assert s.hand_over("t", 0, 0, 3) is False  # read epoch 0, it is 1 now
    assert _by_key(s)[("t", 0)] == PartitionAssignment("t", 0, 2, 1)
    assert s.hand_over("t", 0, 1, 3) is True
    assert _by_key(s)[("t", 0)] == PartitionAssignment("t", 0, 3, 2)
    assert s.hand_over("t", 5, 0, 3) is False  # unassigned


def test_request_move_sets_the_target_and_a_change_of_leader_clears_it(
    cluster: Cluster,
) -> None:
    s = cluster.store
    s.assign_new("t", [1, 1])
    got = s.request_move("t", 0, 2)
    assert got == PartitionAssignment("t", 0, 1, 0, 2)
    assert _by_key(s)[("t", 0)] == got
    s.request_move("t", 1, 3)
    # the leader hands over to its target
    assert s.hand_over("t", 0, got.leader_epoch, 2)
    assert _by_key(s)[("t", 0)] == PartitionAssignment("t", 0, 2, 1, None)
    # a controller move clears a pending target too
    lease = s.acquire_controller(1, LONG)
    assert lease is not None
    assert s.apply_moves(lease.epoch, [Move("t", 1, 0, 3)]) == 1
    assert _by_key(s)[("t", 1)] == PartitionAssignment("t", 1, 3, 1, None)
    with pytest.raises(UnknownPartitionError):
        s.request_move("t", 7, 2)
    with pytest.raises(UnknownPartitionError):
        s.request_move("nope", 0, 2)


def test_a_target_asked_for_during_a_hand_over_survives_it(cluster: Cluster) -> None:
    """A balancing move to node 3 is under way (its leader flushed and reads
    epoch 0) when an operator asks for node 2: the hand-over to 3 lands, and
    the operator's target stays for node 3 to hand over to in turn."""
    s = cluster.store
    s.assign_new("t", [1, 1])
    s.request_move("t", 0, 3)
    s.request_move("t", 0, 2)  # the operator's, while node 1 hands over to 3
    assert s.hand_over("t", 0, 0, 3, carried=3)
    assert _by_key(s)[("t", 0)] == PartitionAssignment("t", 0, 3, 1, 2)
    assert s.hand_over("t", 0, 1, 2, carried=2)
    assert _by_key(s)[("t", 0)] == PartitionAssignment("t", 0, 2, 2, None)
    # a cancellation hands over to the leader itself and clears the target it carries
    s.request_move("t", 1, 3)
    assert s.hand_over("t", 1, 0, 1, carried=3)
    assert _by_key(s)[("t", 1)] == PartitionAssignment("t", 1, 1, 1, None)
    # the hand-over to 3 read epoch 0: it loses to the cancellation
    assert s.hand_over("t", 1, 0, 3, carried=3) is False


# --- change tracking ------------------------------------------------------------------------
def test_version_grows_with_every_change(cluster: Cluster) -> None:
    s = cluster.store
    other = cluster.client()
    seen = [s.version()]

    def changed() -> None:
        v = s.version()
        assert v > seen[-1]
        assert other.version() == v  # every client reads the same version
        seen.append(v)

    inc = _register(s, 1)
    changed()
    s.set_draining(1, inc, True)
    changed()
    lease = s.acquire_controller(1, LONG)
    assert lease is not None
    changed()
    s.assign_new("t", [1, 1])
    changed()
    s.apply_moves(lease.epoch, [Move("t", 0, 0, 2)])
    changed()
    s.request_move("t", 1, 2)
    changed()
    s.hand_over("t", 1, 0, 2)
    changed()
    s.remove_topic("t")
    changed()
    s.resign_controller(1, lease.epoch)
    changed()
    s.unregister_broker(1, inc)
    changed()


def test_renewals_and_refused_calls_are_not_changes(cluster: Cluster) -> None:
    s = cluster.store
    inc = _register(s, 1)
    lease = s.acquire_controller(1, LONG)
    assert lease is not None
    s.assign_new("t", [1])
    v = s.version()
    assert s.heartbeat(1, inc, LONG)
    assert s.acquire_controller(1, LONG) is not None
    assert s.acquire_controller(2, LONG) is None
    assert s.hand_over("t", 0, 9, 2) is False
    assert s.apply_moves(lease.epoch, [Move("t", 0, 9, 2)]) == 0
    s.assign_new("t", [2])
    s.unregister_broker(1, inc + 100)
    assert s.version() == v


def _timed_wait(store: ClusterStore, timeout_s: float) -> float:
    start = time.monotonic()
    store.wait_for_change(timeout_s)
    return time.monotonic() - start


def test_wait_for_change_wakes_on_a_change_through_another_client(cluster: Cluster) -> None:
    waiter, changer = cluster.store, cluster.client()
    waiter.wait_for_change(0)  # forget the changes so far
    result: list[float] = []
    t = threading.Thread(target=lambda: result.append(_timed_wait(waiter, 10.0)))
    t.start()
    time.sleep(0.3)
    assert t.is_alive()  # no change yet: still waiting
    changer.assign_new("t", [1])
    t.join(10)
    assert result and 0.2 < result[0] < 3.0


def test_wait_for_change_returns_at_once_after_an_unseen_change(cluster: Cluster) -> None:
    waiter, changer = cluster.store, cluster.client()
    waiter.wait_for_change(0)
    changer.assign_new("t", [1])
    time.sleep(0.1)  # the notification travels (PostgreSQL)
    assert _timed_wait(waiter, 5.0) < 1.0
    # seen now: the next wait runs to its timeout
    assert 0.2 <= _timed_wait(waiter, 0.25) < 2.0


def test_wait_for_change_without_a_change_times_out(cluster: Cluster) -> None:
    cluster.store.wait_for_change(0)
    assert 0.2 <= _timed_wait(cluster.store, 0.25) < 2.0


# --- clock and factory ------------------------------------------------------------------------
def test_now_ms_is_the_store_clock(cluster: Cluster) -> None:
    s = cluster.store
    if cluster.kind == "memory":
        assert s.now_ms() == cluster.clock[0]
    else:
        assert abs(s.now_ms() - time.time() * 1000) < 5_000
    a = s.now_ms()
    cluster.let_pass(50)
    assert s.now_ms() >= a + 50


def test_a_closed_store_refuses_calls(cluster: Cluster) -> None:
    c = cluster.client()
    c.close()
    with pytest.raises(ClusterError, match="closed"):
        c.version()


def test_open_cluster_store_by_scheme() -> None:
    assert isinstance(open_cluster_store("memory://"), MemoryClusterStore)
    for url in ("sqlite:///meta.db", "file:///x", "mysql://h/db"):
        with pytest.raises(ConfigError) as info:
            open_cluster_store(url)
        assert info.value.key == "metadata_url"
        assert "PostgreSQL" in str(info.value)


def test_open_cluster_store_postgres_with_a_schema() -> None:
    with temporary_database("tl_cluster") as url:
        for scheme_url in (f"{url}?schema=c1", url.replace("postgresql://", "postgres://", 1)):
            s = open_cluster_store(scheme_url)
            assert isinstance(s, PostgresClusterStore)
            s.assign_new("t", [1])
            assert len(s.assignments()) == 1  # schemas (and the default one) are separate
            s.close()
