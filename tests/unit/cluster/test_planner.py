"""The controller's decisions: spreading, failover and count balancing."""

from __future__ import annotations

from collections import Counter

from ingest.cluster.api import NO_LEADER, BrokerInfo, PartitionAssignment
from ingest.cluster.planner import balance_targets, failover_moves, leaders_for_new

NOW = 1_000_000


def broker(node: int, *, live: bool = True, draining: bool = False) -> BrokerInfo:
    return BrokerInfo(
        node, node, "127.0.0.1", 9000 + node, None, f"n{node}/", draining, NOW + (1 if live else -1)
    )


def led(*leaders: int, topic: str = "t") -> list[PartitionAssignment]:
    return [PartitionAssignment(topic, i, leader, 3) for i, leader in enumerate(leaders)]


def test_new_partitions_spread_over_live_brokers_least_loaded_first() -> None:
    brokers = [broker(1), broker(2), broker(3), broker(4, live=False)]
    existing = led(1, 1, 2)
    picks = leaders_for_new(6, brokers, existing, NOW)
    total = Counter(picks) + Counter(a.leader for a in existing)
    assert set(picks) <= {1, 2, 3}
    assert max(total.values()) - min(total.values()) <= 1


def test_new_partitions_wait_for_a_broker_when_none_is_eligible() -> None:
    assert leaders_for_new(2, [broker(1, draining=True)], [], NOW) == [NO_LEADER, NO_LEADER]


def test_dead_leaders_partitions_move_only_after_recovery() -> None:
    brokers = [broker(1), broker(2), broker(3, live=False)]
    assignments = led(1, 2, 3, 3)
    assert failover_moves(brokers, assignments, NOW) == []
    moves = failover_moves(brokers, assignments, NOW, recovered={3})
    assert {(m.partition, m.expected_epoch) for m in moves} == {(2, 3), (3, 3)}
    assert {m.leader for m in moves} == {1, 2}  # one each: counts stay even


def test_unassigned_partitions_get_a_leader_at_once() -> None:
    moves = failover_moves([broker(1)], led(NO_LEADER), NOW)
    assert [(m.partition, m.leader) for m in moves] == [(0, 1)]


def test_balance_moves_from_the_most_to_the_least_loaded() -> None:
    brokers = [broker(1), broker(2), broker(3)]
    targets = balance_targets(brokers, led(1, 1, 1, 1, 1, 2), NOW, max_moves=10)
    after = Counter({1: 5, 2: 1, 3: 0})
    for t in targets:
        after[1] -= 1
        after[t.target] += 1
    assert max(after.values()) - min(after.values()) <= 1
    assert len(targets) == 3


def test_balance_is_quiet_when_counts_differ_by_at_most_one() -> None:
    brokers = [broker(1), broker(2), broker(3)]
    assert balance_targets(brokers, led(1, 1, 2, 2, 3), NOW, max_moves=10) == []


def test_balance_waits_while_a_move_is_in_flight() -> None:
    brokers = [broker(1), broker(2)]
    assignments = led(1, 1, 1, 1)
    assignments[0] = PartitionAssignment("t", 0, 1, 3, target=2)
    assert balance_targets(brokers, assignments, NOW, max_moves=10) == []


def test_draining_broker_hands_every_partition_away() -> None:
    brokers = [broker(1, draining=True), broker(2), broker(3)]
    targets = balance_targets(brokers, led(1, 1, 1, 2, 3), NOW, max_moves=10)
    assert sorted(t.partition for t in targets) == [0, 1, 2]
    assert all(t.target in (2, 3) for t in targets)


def test_balance_respects_the_move_bound() -> None:
    brokers = [broker(1), broker(2)]
    assert len(balance_targets(brokers, led(*[1] * 10), NOW, max_moves=2)) == 2
