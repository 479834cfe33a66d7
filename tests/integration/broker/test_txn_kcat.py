"""kcat's consumer against transactions written by another client.

kcat cannot produce transactionally; its consumer is librdkafka, which reads
with ``isolation.level=read_committed`` by default. The transactions here are
written with confluent-kafka. kcat must be installed: these tests fail (they
do not skip) without it.
"""

from __future__ import annotations

import shutil
import subprocess

from confluent_kafka import Producer

from tests.integration.broker.conftest import RECENT_TS, create_topic, quiet, unique
from tests.support.platform import TidelakeProcess


def _kcat(*args: str, timeout: float = 30) -> str:
    exe = shutil.which("kcat")
    assert exe is not None, "kcat is not installed (apt-get install kcat)"
    proc = subprocess.run([exe, "-q", *args], capture_output=True, timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout.decode()


def _consume(tidelake: TidelakeProcess, topic: str, *extra: str) -> dict[int, list[str]]:
    """Everything ``kcat -C -e`` reads (it exits at the end of each
    partition), as "offset:value" per partition."""
    out = _kcat(
        "-b", tidelake.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e",
        "-f", "%p %o:%s\\n", *extra,
    )  # fmt: skip
    got: dict[int, list[str]] = {}
    for line in out.splitlines():
        part, rest = line.split(" ", 1)
        got.setdefault(int(part), []).append(rest)
    return got


def _txn_producer(tidelake: TidelakeProcess) -> Producer:
    p = Producer(
        quiet(
            {
                "bootstrap.servers": tidelake.bootstrap,
                "transactional.id": unique("kcat-tid"),
                "transaction.timeout.ms": 60_000,
            }
        )
    )
    p.init_transactions(20)
    return p


def _send(p: Producer, topic: str, values: list[str]) -> None:
    for v in values:
        i = int(v.split("-")[1])
        p.produce(topic, value=v.encode(), partition=i % 2, timestamp=RECENT_TS + i)
    assert p.flush(20) == 0


def test_kcat_reads_exactly_the_committed_records_and_with_read_uncommitted_all(
    tidelake: TidelakeProcess,
) -> None:
    topic = unique("kcat-txn")
    create_topic(tidelake.bootstrap, topic, partitions=2)
    p = _txn_producer(tidelake)
    p.begin_transaction()
    _send(p, topic, ["c-0", "c-1", "c-2", "c-3"])
    p.commit_transaction(20)
    p.begin_transaction()
    _send(p, topic, ["a-4", "a-5", "a-6", "a-7"])
    p.abort_transaction(20)
    p.begin_transaction()
    _send(p, topic, ["c-8", "c-9"])
    p.commit_transaction(20)

    # Each partition: two records of the first transaction (offsets 0, 1), its
    # commit marker (2), two aborted records (3, 4), the abort marker (5), one
    # record of the last transaction (6) and its commit marker (7).
    assert _consume(tidelake, topic) == {
        0: ["0:c-0", "1:c-2", "6:c-8"],
        1: ["0:c-1", "1:c-3", "6:c-9"],
    }
    assert _consume(tidelake, topic, "-X", "isolation.level=read_uncommitted") == {
        0: ["0:c-0", "1:c-2", "3:a-4", "4:a-6", "6:c-8"],
        1: ["0:c-1", "1:c-3", "3:a-5", "4:a-7", "6:c-9"],
    }

    # An open transaction: read_committed stops before it (kcat still ends,
    # at the last stable offset), read_uncommitted reads into it.
    p.begin_transaction()
    _send(p, topic, ["o-10", "o-11"])
    assert _consume(tidelake, topic) == {
        0: ["0:c-0", "1:c-2", "6:c-8"],
        1: ["0:c-1", "1:c-3", "6:c-9"],
    }
    dirty = _consume(tidelake, topic, "-X", "isolation.level=read_uncommitted")
    assert (dirty[0][-1], dirty[1][-1]) == ("8:o-10", "8:o-11")
    p.commit_transaction(20)
    assert _consume(tidelake, topic) == {
        0: ["0:c-0", "1:c-2", "6:c-8", "8:o-10"],
        1: ["0:c-1", "1:c-3", "6:c-9", "8:o-11"],
    }


def test_kcat_skips_records_of_a_fenced_producer(tidelake: TidelakeProcess) -> None:
    topic = unique("kcat-fence")
    create_topic(tidelake.bootstrap, topic, partitions=2)
    tid = unique("kcat-fence-tid")
    conf = quiet({"bootstrap.servers": tidelake.bootstrap, "transactional.id": tid})
    zombie = Producer(conf)
    zombie.init_transactions(20)
    zombie.begin_transaction()
    _send(zombie, topic, ["z-0", "z-1"])
    successor = Producer(conf)
    successor.init_transactions(20)  # aborts the zombie's transaction
    successor.begin_transaction()
    _send(successor, topic, ["s-2", "s-3"])
    successor.commit_transaction(20)

    assert _consume(tidelake, topic) == {0: ["2:s-2"], 1: ["2:s-3"]}
    assert _consume(tidelake, topic, "-X", "isolation.level=read_uncommitted") == {
        0: ["0:z-0", "2:s-2"],
        1: ["0:z-1", "2:s-3"],
    }
