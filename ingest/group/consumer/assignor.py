"""Server-side assignors of the consumer group protocol (KIP-848): ``uniform``
(sticky: a partition stays with its member while that keeps the counts
balanced) and ``range`` (per topic, contiguous ranges in member order).

Pure functions from the members' subscriptions, the topics' partition counts
and the current target to the next target.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["ASSIGNORS", "uniform", "range_assignor", "Assignment"]

Partition = tuple[str, int]
Assignment = dict[str, set[Partition]]


def _partitions(topics: Mapping[str, int], subscribed: set[str]) -> list[Partition]:
    return [(t, p) for t in sorted(subscribed) if t in topics for p in range(topics[t])]


def uniform(
    subscriptions: Mapping[str, set[str]],
    topics: Mapping[str, int],
    current: Mapping[str, set[Partition]],
) -> Assignment:
    """Every subscribed partition to one member; counts differ by at most one
    between members with the same subscription; a partition keeps its current
    member unless that member is over its share."""
    members = sorted(subscriptions)
    out: Assignment = {m: set() for m in members}
    if not members:
        return out
    wanted = sorted({tp for m in members for tp in _partitions(topics, subscriptions[m])})
    eligible = {tp: [m for m in members if tp[0] in subscriptions[m]] for tp in wanted}
    # a member's share: its partitions over the members that could take them;
    # ``extra`` members may hold one more than the floor of theirs
    floor: dict[str, int] = {}
    for m in members:
        floor[m] = int(sum(1 / len(eligible[tp]) for tp in wanted if m in eligible[tp]) + 1e-9)
    extra = max(0, len(wanted) - sum(floor.values()))
    owner = {tp: m for m, tps in current.items() for tp in tps if m in out}
    kept_over: set[str] = set()
    unplaced: list[Partition] = []
    for tp in wanted:
        held = owner.get(tp)
        if held is None or held not in eligible[tp]:
            unplaced.append(tp)
        elif len(out[held]) < floor[held]:
            out[held].add(tp)
        elif len(out[held]) == floor[held] and extra > 0 and held not in kept_over:
            out[held].add(tp)
            kept_over.add(held)
            extra -= 1
        else:
            unplaced.append(tp)
    for tp in unplaced:
        best = min(
            eligible[tp],
            key=lambda m: (
                len(out[m]) >= floor[m] + (1 if m in kept_over else 0),
                len(out[m]) - floor[m],
                len(out[m]),
                m,
            ),
        )
        if len(out[best]) >= floor[best] and best not in kept_over:
            kept_over.add(best)
        out[best].add(tp)
    return out


def range_assignor(
    subscriptions: Mapping[str, set[str]],
    topics: Mapping[str, int],
    current: Mapping[str, set[Partition]],
) -> Assignment:
    """For each topic, its partitions in contiguous ranges over the members
    subscribed to it, in member id order (the first members get one more)."""
    del current
    out: Assignment = {m: set() for m in subscriptions}
    for topic in sorted({t for subs in subscriptions.values() for t in subs}):
        if topic not in topics:
            continue
        members = sorted(m for m, subs in subscriptions.items() if topic in subs)
        count = topics[topic]
        base, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members):
            n = base + (1 if i < extra else 0)
            out[m] |= {(topic, p) for p in range(start, start + n)}
            start += n
    return out


ASSIGNORS = {"uniform": uniform, "range": range_assignor}
