"""kafkajs transactions, run with Node.js: a transactional producer
(``transactionalId``, ``idempotent``, one request in flight) commits and
aborts, its read_committed consumer (``readUncommitted: false``) sees exactly
the committed records in order and a read_uncommitted one all of them, a
consume-transform-produce loop with ``sendOffsets`` moves its group's offsets
only on commit, and a second producer with the same transactional id fences
the first.

The script is ``kafkajs/txn.js``; it prints JSON lines that these tests assert
on. kafkajs (the version in ``kafkajs/package.json``) lives in
``.cache/kafkajs`` (git-ignored), installed by ``scripts/dev.sh install`` or
else by the session fixture here. Without Node.js, or when kafkajs cannot be
installed or loaded, the tests fail and say why; they never skip.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.integration.broker.conftest import create_topic, quiet, unique
from tests.support.kafkajs import SCRIPTS
from tests.support.platform import TidelakeProcess

_JS = SCRIPTS


def _node(env: dict[str, str], command: str, timeout: float = 60, **args: Any) -> list[Any]:
    """Run ``txn.js <command>``; its JSON lines. The script gives up by itself
    (printing why) 10 s before ``timeout``."""
    args["timeoutMs"] = int((timeout - 10) * 1000)
    proc = subprocess.run(
        ["node", str(_JS / "txn.js"), command, json.dumps(args)],
        env=env,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    out = proc.stdout.decode()
    assert proc.returncode == 0, f"{command}: {out}\n{proc.stderr.decode(errors='replace')}"
    return [json.loads(line) for line in out.splitlines()]


def _consume(
    env: dict[str, str], tidelake: TidelakeProcess, topic: str, expect: int, *, committed: bool
) -> dict[int, list[tuple[int, str]]]:
    """What a kafkajs consumer in a fresh group reads from the start, as
    (offset, value) per partition."""
    got: dict[int, list[tuple[int, str]]] = {}
    for m in _node(
        env,
        "consume",
        broker=tidelake.bootstrap,
        topic=topic,
        group=unique("kjs-reader"),
        readUncommitted=not committed,
        expect=expect,
        settleMs=500,
    ):
        got.setdefault(m["partition"], []).append((m["offset"], m["value"]))
    return got


def _values(got: dict[int, list[tuple[int, str]]]) -> dict[int, list[str]]:
    for part in got.values():
        offsets = [o for o, _v in part]
        assert offsets == sorted(set(offsets)), offsets  # in order, each once
    return {p: [v for _o, v in part] for p, part in got.items()}


def test_kafkajs_commits_and_aborts_and_read_committed_sees_exactly_the_committed_records(
    kafkajs: dict[str, str], tidelake: TidelakeProcess
) -> None:
    topic = unique("kjs-txn")
    create_topic(tidelake.bootstrap, topic, partitions=2)

    def records(prefix: str, numbers: range) -> list[dict[str, Any]]:
        return [{"partition": i % 2, "value": f"{prefix}-{i}"} for i in numbers]

    ended = _node(
        kafkajs,
        "produce",
        broker=tidelake.bootstrap,
        topic=topic,
        tid=unique("kjs-tid"),
        transactions=[
            {"end": "commit", "records": records("c", range(0, 6))},
            {"end": "abort", "records": records("a", range(6, 12))},
            {"end": "commit", "records": records("c", range(12, 18))},
        ],
    )
    assert ended == [{"ended": "commit"}, {"ended": "abort"}, {"ended": "commit"}]

    def by_partition(values: list[str]) -> dict[int, list[str]]:
        return {p: [v for v in values if int(v.split("-")[1]) % 2 == p] for p in (0, 1)}

    committed = [f"c-{i}" for i in [*range(0, 6), *range(12, 18)]]
    got = _consume(kafkajs, tidelake, topic, len(committed), committed=True)
    assert _values(got) == by_partition(committed)
    everything = [*(f"c-{i}" for i in range(6)), *(f"a-{i}" for i in range(6, 12))]
    everything += [f"c-{i}" for i in range(12, 18)]
    got = _consume(kafkajs, tidelake, topic, len(everything), committed=False)
    assert _values(got) == by_partition(everything)


def test_kafkajs_read_committed_consumer_waits_for_an_open_transaction(
    kafkajs: dict[str, str], tidelake: TidelakeProcess
) -> None:
    topic = unique("kjs-open")
    create_topic(tidelake.bootstrap, topic, partitions=1)
    p = Producer(quiet({"bootstrap.servers": tidelake.bootstrap, "transactional.id": unique("t")}))
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"o-{i}".encode(), partition=0)
    assert p.flush(20) == 0
    assert _consume(kafkajs, tidelake, topic, 0, committed=True) == {}
    dirty = _consume(kafkajs, tidelake, topic, 3, committed=False)
    assert dirty == {0: [(0, "o-0"), (1, "o-1"), (2, "o-2")]}
    p.commit_transaction(20)
    got = _consume(kafkajs, tidelake, topic, 3, committed=True)
    assert got == {0: [(0, "o-0"), (1, "o-1"), (2, "o-2")]}


def test_kafkajs_consume_transform_produce_moves_the_group_offsets_only_on_commit(
    kafkajs: dict[str, str], tidelake: TidelakeProcess
) -> None:
    src, dst, group = unique("kjs-in"), unique("kjs-out"), unique("kjs-ctp")
    create_topic(tidelake.bootstrap, src, partitions=1)
    create_topic(tidelake.bootstrap, dst, partitions=1)
    plain = Producer(quiet({"bootstrap.servers": tidelake.bootstrap}))
    for i in range(12):
        plain.produce(src, value=str(i).encode(), partition=0)
    assert plain.flush(20) == 0

    steps = _node(
        kafkajs,
        "ctp",
        timeout=90,
        broker=tidelake.bootstrap,
        src=src,
        dst=dst,
        group=group,
        tid=unique("kjs-ctp-tid"),
        count=12,
    )
    # every input once committed; the first try at offsets 1, 4, 7, 10 aborted
    expected = []
    for o in range(12):
        if o % 3 == 1:
            expected.append({"offset": o, "end": "abort", "committed": o})
        expected.append({"offset": o, "end": "commit", "committed": o + 1})
    assert steps == expected

    got = _consume(kafkajs, tidelake, dst, 12, committed=True)
    assert _values(got) == {0: [f"x{i}" for i in range(12)]}
    dirty = _values(_consume(kafkajs, tidelake, dst, 16, committed=False))[0]
    assert len(dirty) == 16 and sorted(set(dirty)) == sorted(f"x{i}" for i in range(12))


@pytest.mark.parametrize("zombie_step", ["commit", "send"])
def test_kafkajs_producer_is_fenced_by_a_second_one_with_its_transactional_id(
    kafkajs: dict[str, str], tidelake: TidelakeProcess, zombie_step: str
) -> None:
    topic = unique(f"kjs-fence-{zombie_step}")
    create_topic(tidelake.bootstrap, topic, partitions=1)
    successor, zombie = _node(
        kafkajs,
        "fence",
        broker=tidelake.bootstrap,
        topic=topic,
        tid=unique("kjs-fence-tid"),
        zombieStep=zombie_step,
    )
    assert successor == {"successor": "committed"}
    assert zombie["zombie"] == "failed", zombie
    # kafkajs knows no PRODUCER_FENCED (90): the broker answers its old
    # request versions INVALID_PRODUCER_EPOCH, as Kafka does
    error = zombie["error"]
    assert (error["name"], error["type"]) == (
        "KafkaJSProtocolError",
        "INVALID_PRODUCER_EPOCH",
    ), error
    assert _values(_consume(kafkajs, tidelake, topic, 1, committed=True)) == {0: ["s-1"]}
    dirty = _values(_consume(kafkajs, tidelake, topic, 2, committed=False))
    assert dirty == {0: ["z-0", "s-1"]}
