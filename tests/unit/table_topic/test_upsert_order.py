"""Upsert order: within a partition the record with the higher offset wins, however the
records were cut into commits; timestamps only break ties between partitions."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from ingest.log.topic_config import TopicConfigRegistry
from table_topic.commit import TableWriter
from table_topic.config import TableTopicConfig, register_table_topic_configs
from table_topic.convert.chunk import METADATA_FIELDS

_BASE_US = 1_700_000_000_000_000


def _cfg() -> TableTopicConfig:
    reg = TopicConfigRegistry.default()
    register_table_topic_configs(reg)
    values = {
        "table.topic.convert.value.type": "by_schema_id",
        "table.topic.transform.value.type": "flatten",
        "table.topic.id.columns": "id",
        "table.topic.upsert.enable": "true",
    }
    return TableTopicConfig.from_topic_config("t", reg.resolved(reg.validate(values)))


def _catalog(root: Path) -> SqlCatalog:
    root.mkdir(parents=True, exist_ok=True)
    return SqlCatalog("tidelake", uri=f"sqlite:///{root}/c.db", warehouse=(root / "wh").as_uri())


# one record: (partition, offset, timestamp in ms from _BASE_US, id, value)
Rec = tuple[int, int, int, int, str]


def _table(recs: list[Rec]) -> pa.Table:
    n = len(recs)
    meta = [
        pa.array([r[0] for r in recs], pa.int32()),
        pa.array([r[1] for r in recs], pa.int64()),
        pa.array([_BASE_US + r[2] * 1000 for r in recs], pa.timestamp("us", tz="UTC")),
        pa.array([None] * n, pa.binary()),
        pa.array([[]] * n, METADATA_FIELDS[4].type),
    ]
    cols = [pa.array([r[3] for r in recs], pa.int64()), pa.array([r[4] for r in recs])]
    return pa.Table.from_arrays(meta + cols, names=[f.name for f in METADATA_FIELDS] + ["id", "v"])


def _commit_in(catalog: SqlCatalog, recs: list[Rec], cuts: list[int]) -> dict[int, str]:
    """Commit ``recs`` (in offset order per partition) in batches ending at ``cuts``; the
    final table as {id: v}."""
    w = TableWriter(catalog, _cfg(), 1 << 20)
    offsets: dict[int, int] = {}
    start = 0
    for end in [*cuts, len(recs)]:
        batch = recs[start:end]
        start = end
        if not batch:
            continue
        for p, o, *_ in batch:
            offsets[p] = max(offsets.get(p, 0), o + 1)
        w.commit([_table(batch)], dict(offsets))
    got = catalog.load_table(("default", "t")).scan().to_arrow()
    ids = got.column("id").to_pylist()
    assert len(ids) == len(set(ids)), "an id appears twice"
    return dict(zip(ids, got.column("v").to_pylist(), strict=True))


def test_within_one_commit_the_highest_offset_wins_over_a_later_timestamp(
    tmp_path: Path,
) -> None:
    # producer timestamps go backwards (CreateTime set by clients, clock skew)
    recs: list[Rec] = [(0, 0, 300, 1, "first"), (0, 1, 200, 1, "second"), (0, 2, 100, 1, "third")]
    assert _commit_in(_catalog(tmp_path), recs, []) == {1: "third"}


def test_across_commits_the_highest_offset_wins_over_a_later_timestamp(tmp_path: Path) -> None:
    recs: list[Rec] = [(0, 0, 300, 1, "first"), (0, 1, 200, 1, "second"), (0, 2, 100, 1, "third")]
    assert _commit_in(_catalog(tmp_path), recs, [1, 2]) == {1: "third"}


def test_an_interleaved_partition_does_not_change_a_partitions_winner(tmp_path: Path) -> None:
    # id 1 lives in partition 0, id 2 in partition 1; the batches interleave them
    recs: list[Rec] = [
        (1, 0, 50, 2, "p1-a"),
        (0, 0, 900, 1, "p0-a"),
        (0, 1, 10, 1, "p0-b"),
        (1, 1, 40, 2, "p1-b"),
    ]
    assert _commit_in(_catalog(tmp_path), recs, []) == {1: "p0-b", 2: "p1-b"}


def _random_stream(seed: int) -> list[Rec]:
    """Keyed records as a producer partitions them: an id always goes to one partition;
    timestamps jump around (backwards too) within a partition."""
    rng = random.Random(seed)
    next_offset = {0: 0, 1: 0, 2: 0}
    out: list[Rec] = []
    for i in range(300):
        ident = rng.randrange(25)
        p = ident % 3
        out.append((p, next_offset[p], rng.randrange(1000), ident, f"v{i}"))
        next_offset[p] += 1
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_final_table_does_not_depend_on_how_records_are_batched(
    tmp_path: Path, seed: int
) -> None:
    recs = _random_stream(seed)
    expected: dict[int, str] = {}
    for _p, _o, _ts, ident, v in recs:  # Kafka order: the last record of each id
        expected[ident] = v
    rng = random.Random(seed)
    one_commit = _commit_in(_catalog(tmp_path / "one"), recs, [])
    many_cuts = sorted(rng.sample(range(1, len(recs)), 12))
    many_commits = _commit_in(_catalog(tmp_path / "many"), recs, many_cuts)
    assert one_commit == expected
    assert many_commits == expected


def test_one_id_in_two_partitions_takes_the_later_timestamp_of_each_partitions_last_row(
    tmp_path: Path,
) -> None:
    # no order across partitions: within one commit each partition's last row (by
    # offset) competes and the later timestamp wins; an older row of partition 0
    # with the latest timestamp of all is already replaced inside its partition
    recs: list[Rec] = [(0, 0, 100, 1, "p0-old"), (0, 1, 50, 1, "p0-new"), (1, 0, 70, 1, "p1")]
    assert _commit_in(_catalog(tmp_path / "one"), recs, []) == {1: "p1"}
    # across commits the later commit wins, whatever the timestamps
    assert _commit_in(_catalog(tmp_path / "two"), recs, [2]) == {1: "p1"}
    swapped = [recs[2], recs[0], recs[1]]
    assert _commit_in(_catalog(tmp_path / "three"), swapped, [1]) == {1: "p0-new"}
