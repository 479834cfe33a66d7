"""Several writers of one table (the brokers of a cluster): per-partition compare-and-merge.

Each writer commits the partitions it leads. Commits of disjoint partitions both
land, whatever their order, with the offsets of both in the table; a writer that
planned a partition from offsets another writer has since advanced is refused
and starts again from the table: a partition's offsets are committed once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from table_topic.commit import OFFSETS_PROPERTY, CommitResult, TableWriter, committed_offsets
from table_topic.errors import ConcurrentWriterError
from tests.unit.table_topic.test_commit import cfg, rows

UPSERT = {"table.topic.id.columns": "id", "table.topic.upsert.enable": "true"}


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    return SqlCatalog(
        "tidelake", uri=f"sqlite:///{tmp_path}/c.db", warehouse=(tmp_path / "wh").as_uri()
    )


def _kv(partition: int, offsets: list[int], ids: list[int]) -> pa.Table:
    vs = [f"p{partition}o{o}" for o in offsets]
    return rows(offsets, {"id": pa.array(ids, pa.int64()), "v": pa.array(vs)}, partition)


def _together(n: int) -> Callable[[str], None]:
    """A fault hook that holds each writer's first commit until all ``n`` have written
    their files: every one plans from the same head, then all commit at once."""
    barrier = threading.Barrier(n, timeout=30)
    arrived: list[int] = []
    lock = threading.Lock()

    def hook(point: str) -> None:
        if point != "files_written":
            return
        with lock:
            me = threading.get_ident()
            first = me not in arrived and len(arrived) < n
            if first:
                arrived.append(me)
        if first:
            barrier.wait()

    return hook


def _pairs(catalog: SqlCatalog) -> list[tuple[int, int]]:
    t = catalog.load_table(("default", "t")).scan().to_arrow()
    return sorted(
        zip(
            t.column("_kafka_partition").to_pylist(),
            t.column("_kafka_offset").to_pylist(),
            strict=True,
        )
    )


@pytest.mark.parametrize("keyed", [False, True])
def test_writers_of_disjoint_partitions_committing_at_once_both_land_with_merged_offsets(
    catalog: SqlCatalog, keyed: bool
) -> None:
    c = cfg(**(UPSERT if keyed else {}))
    first = TableWriter(catalog, c, 1 << 20)
    # the table exists with its columns (no schema change races below), nothing of 0-2 yet
    first.commit([_kv(3, [0], [0])], {0: 0, 1: 0, 2: 0, 3: 1})
    hook = _together(2)
    a = TableWriter(catalog, c, 1 << 20, hook)
    b = TableWriter(catalog, c, 1 << 20, hook)
    assert a.offsets() == b.offsets() == {0: 0, 1: 0, 2: 0, 3: 1}

    with ThreadPoolExecutor(2) as pool:
        fa = pool.submit(a.commit, [_kv(0, [0, 1], [1, 2])], {0: 2})
        fb = pool.submit(b.commit, [_kv(1, [0, 1, 2], [3, 4, 5])], {1: 3, 2: 0})
        results: list[CommitResult] = [fa.result(), fb.result()]
    assert [r.rows for r in results] == [2, 3]
    t = catalog.load_table(("default", "t"))
    assert committed_offsets(t) == {0: 2, 1: 3, 2: 0, 3: 1}
    in_property = json.loads(t.properties[OFFSETS_PROPERTY])
    assert {int(k): v for k, v in in_property.items()} == {0: 2, 1: 3, 2: 0, 3: 1}
    assert _pairs(catalog) == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (3, 0)]

    # each goes on from its own offsets; the other's newer commits only rebase it
    a.commit([_kv(0, [2], [1])], {0: 3})
    b.commit([_kv(1, [3], [6]), _kv(2, [0], [7])], {1: 4, 2: 1})
    a.commit([_kv(0, [3], [8])], {0: 4})
    t = catalog.load_table(("default", "t"))
    assert committed_offsets(t) == {0: 4, 1: 4, 2: 1, 3: 1}
    live = _pairs(catalog)
    if keyed:  # id 1 was replaced by its newer row; nothing else shares an id
        assert live == [(0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3), (2, 0), (3, 0)]
    else:
        assert live == [
            (0, 0),
            (0, 1),
            (0, 2),
            (0, 3),
            (1, 0),
            (1, 1),
            (1, 2),
            (1, 3),
            (2, 0),
            (3, 0),
        ]


@pytest.mark.parametrize("keyed", [False, True])
def test_a_stale_leader_cannot_commit_a_partition_the_new_leader_advanced(
    catalog: SqlCatalog, keyed: bool
) -> None:
    """Broker A led partition 0 and planned from offset 2; the partition moved to B,
    which read 2 from the table and committed up to 5. A's commit of the same
    records is refused (whole: its partition 1 does not move either), and A re-reads."""
    c = cfg(**(UPSERT if keyed else {}))
    old = TableWriter(catalog, c, 1 << 20)
    old.commit([_kv(0, [0, 1], [1, 2])], {0: 2, 1: 0})
    new = TableWriter(catalog, c, 1 << 20)
    assert new.offsets_for([0]) == {0: 2}
    new.commit([_kv(0, [2, 3, 4], [3, 4, 5])], {0: 5})

    with pytest.raises(ConcurrentWriterError):
        old.commit([_kv(0, [2, 3, 4], [3, 4, 5]), _kv(1, [0], [9])], {0: 5, 1: 1})
    t = catalog.load_table(("default", "t"))
    assert committed_offsets(t) == {0: 5, 1: 0}
    assert _pairs(catalog) == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4)]
    # the refused writer reads its partitions from the table and goes on from there
    assert old.offsets_for([1]) == {1: 0}
    old.commit([_kv(1, [0], [9])], {1: 1})
    assert committed_offsets(catalog.load_table(("default", "t"))) == {0: 5, 1: 1}


def test_two_leaders_committing_one_partition_at_once_land_it_once(catalog: SqlCatalog) -> None:
    """The race a leader move opens: both planned partition 0 from offset 2 and commit
    together; exactly one lands, the other is refused."""
    c = cfg()
    TableWriter(catalog, c, 1 << 20).commit([_kv(0, [0, 1], [1, 2])], {0: 2})
    hook = _together(2)
    a = TableWriter(catalog, c, 1 << 20, hook)
    b = TableWriter(catalog, c, 1 << 20, hook)
    assert a.offsets_for([0]) == b.offsets_for([0]) == {0: 2}
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(w.commit, [_kv(0, [2, 3], [3, 4])], {0: 4}) for w in (a, b)]
        outcomes = [f.exception() for f in futures]
    assert sum(e is None for e in outcomes) == 1
    assert sum(isinstance(e, ConcurrentWriterError) for e in outcomes) == 1
    assert committed_offsets(catalog.load_table(("default", "t"))) == {0: 4}
    assert _pairs(catalog) == [(0, 0), (0, 1), (0, 2), (0, 3)]
