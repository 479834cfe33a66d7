"""The consumer group protocol of KIP-848, over its state machine: epochs,
server-side assignment, revocation before reassignment (never one partition
with two members), leaving, timeouts, static members and offset checks."""

from __future__ import annotations

import random

from ingest.group.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator, Heartbeat
from ingest.group.consumer.assignor import range_assignor, uniform
from ingest.protocol.errors import ErrorCode

OK = ErrorCode.none


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Harness:
    def __init__(self, topics: dict[str, int] | None = None, session_ms: int = 10_000) -> None:
        self.topics = topics if topics is not None else {"t": 6}
        self.clock = Clock()
        self.coord = ConsumerGroupCoordinator(
            lambda: self.topics,
            ConsumerGroupConfig(session_timeout_ms=session_ms),
            clock=self.clock,
        )
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, set[tuple[str, int]]] = {}

    def join(self, member: str, topics: set[str] | None = None, **kw: object) -> set[tuple[str, int]]:
        res = self.coord.heartbeat(
            "g", Heartbeat(member, 0, subscribed=topics or {"t"}, **kw)  # type: ignore[arg-type]
        )
        assert res.error == OK, res
        assert res.assignment is not None
        self.epochs[member] = res.member_epoch
        self.owned[member] = set(res.assignment)
        return set(res.assignment)

    def beat(self, member: str) -> ErrorCode:
        """A heartbeat as a client sends it: its epoch and what it owns; it
        takes whatever assignment comes back (revoking at once)."""
        res = self.coord.heartbeat(
            "g", Heartbeat(member, self.epochs[member], owned=set(self.owned[member]))
        )
        if res.error == OK:
            self.epochs[member] = res.member_epoch
            if res.assignment is not None:
                self.owned[member] = set(res.assignment)
        return res.error

    def settle(self, rounds: int = 6) -> None:
        for _ in range(rounds):
            for m in list(self.owned):
                self.beat(m)
                self.assert_no_overlap()

    def assert_no_overlap(self) -> None:
        seen: dict[tuple[str, int], str] = {}
        for m, tps in self.owned.items():
            for tp in tps:
                assert tp not in seen, f"{tp} owned by {seen[tp]} and {m}"
                seen[tp] = m


def test_the_first_member_gets_every_partition_at_epoch_one() -> None:
    h = Harness()
    assert h.join("a") == {("t", p) for p in range(6)}
    assert h.epochs["a"] == 1
    group = h.coord.groups["g"]
    assert group.state == "Stable" and group.epoch == group.target_epoch == 1


def test_a_new_member_waits_until_the_old_one_revoked() -> None:
    h = Harness()
    h.join("a")
    first = h.join("b")
    # the partitions b should get are still a's: b gets none of them yet
    assert first == set()
    assert h.coord.groups["g"].state == "Reconciling"
    h.settle()
    assert len(h.owned["a"]) == 3 and len(h.owned["b"]) == 3
    assert h.epochs["a"] == h.epochs["b"] == h.coord.groups["g"].target_epoch
    assert h.coord.groups["g"].state == "Stable"


def test_a_member_that_has_not_revoked_keeps_the_others_waiting() -> None:
    h = Harness()
    h.join("a")
    h.join("b")
    # a hears it must give up three partitions but says it still owns six
    res = h.coord.heartbeat("g", Heartbeat("a", h.epochs["a"], owned={("t", p) for p in range(6)}))
    assert res.assignment is not None and len(res.assignment) == 3
    assert res.member_epoch == 1  # its epoch moves only once it has revoked
    res_b = h.coord.heartbeat("g", Heartbeat("b", h.epochs["b"], owned=set()))
    assert not res_b.assignment  # nothing free yet
    # a confirms; then b gets its three
    h.coord.heartbeat("g", Heartbeat("a", 1, owned=set(res.assignment)))
    res_b = h.coord.heartbeat("g", Heartbeat("b", h.epochs["b"], owned=set()))
    assert res_b.assignment is not None and len(res_b.assignment) == 3
    assert not res_b.assignment & res.assignment


def test_a_member_that_never_revokes_is_removed_after_its_rebalance_timeout() -> None:
    h = Harness()
    h.join("a", rebalance_timeout_ms=2_000)
    h.join("b")
    everything = {("t", p) for p in range(6)}
    h.coord.heartbeat("g", Heartbeat("a", h.epochs["a"], owned=everything))
    h.clock.now += 1.0
    h.coord.tick()
    assert "a" in h.coord.groups["g"].members
    h.clock.now += 1.5
    h.coord.tick()
    assert "a" not in h.coord.groups["g"].members
    res = h.coord.heartbeat("g", Heartbeat("b", h.epochs["b"], owned=set()))
    assert res.assignment == everything


def test_leaving_and_timing_out_free_partitions() -> None:
    h = Harness(session_ms=5_000)
    h.join("a")
    h.join("b")
    h.join("c")
    h.settle()
    assert sorted(len(v) for v in h.owned.values()) == [2, 2, 2]
    res = h.coord.heartbeat("g", Heartbeat("c", -1))
    assert (res.error, res.member_epoch) == (OK, -1)
    del h.owned["c"]
    h.settle()
    assert sorted(len(v) for v in h.owned.values()) == [3, 3]
    # b goes silent
    for _ in range(6):
        h.clock.now += 1.0
        h.beat("a")
        h.coord.tick()
    assert "b" not in h.coord.groups["g"].members
    del h.owned["b"]
    h.settle()
    assert h.owned["a"] == {("t", p) for p in range(6)}
    assert h.coord.heartbeat("g", Heartbeat("b", 2)).error == ErrorCode.unknown_member_id


def test_a_stale_epoch_is_fenced_but_the_previous_one_is_accepted_once() -> None:
    h = Harness()
    h.join("a")
    h.join("b")
    h.settle()
    epoch = h.epochs["a"]
    res = h.coord.heartbeat("g", Heartbeat("a", epoch + 5))
    assert res.error == ErrorCode.fenced_member_epoch
    h.join("c")
    h.settle()
    # a missed the answer that moved it: its previous epoch is still heard
    previous = h.coord.groups["g"].members["a"].previous_epoch
    res = h.coord.heartbeat("g", Heartbeat("a", previous, owned=h.owned["a"]))
    assert res.error == OK
    assert h.coord.heartbeat("g", Heartbeat("zzz", 3)).error == ErrorCode.unknown_member_id


def test_subscriptions_and_new_partitions_change_the_target() -> None:
    h = Harness(topics={"t": 2, "u": 2})
    assert h.join("a", {"t"}) == {("t", 0), ("t", 1)}
    h.coord.heartbeat("g", Heartbeat("a", h.epochs["a"], subscribed={"t", "u"}))
    h.settle()
    assert h.owned["a"] == {("t", 0), ("t", 1), ("u", 0), ("u", 1)}
    h.topics["u"] = 4  # CreatePartitions
    h.settle()
    assert ("u", 3) in h.owned["a"]


def test_a_regular_expression_subscription_follows_the_topics() -> None:
    h = Harness(topics={"orders-eu": 1, "orders-us": 1, "clicks": 1})
    res = h.coord.heartbeat("g", Heartbeat("a", 0, subscribed=set(), regex="orders-.*"))
    assert res.assignment == {("orders-eu", 0), ("orders-us", 0)}
    h.epochs["a"], h.owned["a"] = res.member_epoch, set(res.assignment)
    h.topics["orders-apac"] = 1
    h.settle()
    assert ("orders-apac", 0) in h.owned["a"]


def test_a_static_member_that_comes_back_gets_its_partitions_again() -> None:
    h = Harness()
    h.join("a", instance_id="i-1")
    h.join("b", instance_id="i-2")
    h.settle()
    before = set(h.owned["a"])
    res = h.coord.heartbeat("g", Heartbeat("a", -2))
    assert res.error == OK
    # another member with a's instance id while a is away takes its place
    back = h.coord.heartbeat("g", Heartbeat("a2", 0, subscribed={"t"}, instance_id="i-1"))
    assert back.error == OK and back.assignment == before
    # but not while the holder is active
    taken = h.coord.heartbeat("g", Heartbeat("x", 0, subscribed={"t"}, instance_id="i-2"))
    assert taken.error == ErrorCode.unreleased_instance_id


def test_offset_commits_need_the_member_at_its_epoch() -> None:
    h = Harness()
    h.join("a")
    assert h.coord.validate_offsets("g", "a", h.epochs["a"]) == OK
    assert h.coord.validate_offsets("g", "a", h.epochs["a"] - 1) == ErrorCode.stale_member_epoch
    assert h.coord.validate_offsets("g", "nobody", 1) == ErrorCode.unknown_member_id
    assert h.coord.validate_offsets("g", "", -1) == OK  # an admin's commit
    assert h.coord.validate_offsets("other", "a", 1) is None  # not a consumer group


def test_a_classic_group_with_members_keeps_its_id() -> None:
    coord = ConsumerGroupCoordinator(lambda: {"t": 1}, classic_active=lambda g: g == "classic")
    res = coord.heartbeat("classic", Heartbeat("a", 0, subscribed={"t"}))
    assert res.error == ErrorCode.group_id_not_found


def test_random_membership_churn_never_gives_a_partition_to_two_members() -> None:
    rng = random.Random(7)
    h = Harness(topics={"t": 7, "u": 3})
    h.join("m0", {"t", "u"})
    for step in range(60):
        action = rng.random()
        if action < 0.25 and len(h.owned) < 5:
            h.join(f"m{step + 1}", {"t", "u"})
        elif action < 0.4 and len(h.owned) > 1:
            leaving = rng.choice(sorted(h.owned))
            h.coord.heartbeat("g", Heartbeat(leaving, -1))
            del h.owned[leaving]
        for m in rng.sample(sorted(h.owned), len(h.owned)):
            h.beat(m)
            h.assert_no_overlap()
    h.settle(10)
    owned = [tp for tps in h.owned.values() for tp in tps]
    assert sorted(owned) == sorted([("t", p) for p in range(7)] + [("u", p) for p in range(3)])
    counts = sorted(len(v) for v in h.owned.values())
    assert counts[-1] - counts[0] <= 1


def test_assignors() -> None:
    subs = {"a": {"t"}, "b": {"t"}, "c": {"t"}}
    first = uniform(subs, {"t": 7}, {})
    assert sorted(len(v) for v in first.values()) == [2, 2, 3]
    # sticky: one more member moves as few partitions as balance needs
    subs["d"] = {"t"}
    second = uniform(subs, {"t": 7}, first)
    moved = sum(len(first[m] - second[m]) for m in first)
    assert moved == 1 and sorted(len(v) for v in second.values()) == [1, 2, 2, 2]
    ranged = range_assignor({"a": {"t", "u"}, "b": {"t"}}, {"t": 5, "u": 2}, {})
    assert ranged == {
        "a": {("t", 0), ("t", 1), ("t", 2), ("u", 0), ("u", 1)},
        "b": {("t", 3), ("t", 4)},
    }
