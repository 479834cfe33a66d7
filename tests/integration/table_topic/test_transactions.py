"""A table topic fed by transactional producers holds only committed rows,
and its table never runs past the last stable offset."""

from __future__ import annotations

import json
import time

import httpx

from tests.integration.table_topic.conftest import TableTopics


def test_aborted_records_never_reach_the_table_and_an_open_transaction_holds_it(
    tt: TableTopics,
) -> None:
    topic = "txn-orders"
    tt.create_topic(
        topic,
        partitions=2,
        **{"table.topic.convert.value.type": "string", "table.topic.convert.key.type": "string"},
    )
    tx = tt.producer(**{"transactional.id": "tt-txn"})
    tx.init_transactions(30)
    for round_, commit in enumerate([True, False, True]):
        tx.begin_transaction()
        for i in range(40):
            tx.produce(topic, key=f"r{round_}-{i}".encode(), value=b"x", partition=i % 2)
        if commit:
            tx.commit_transaction(30)
        else:
            tx.flush(30)
            tx.abort_transaction(30)
    plain = tt.producer()
    for i in range(10):
        plain.produce(topic, key=f"plain-{i}".encode(), value=b"y", partition=i % 2)
    assert plain.flush(30) == 0
    rows = tt.wait_rows(topic, 90)
    keys = sorted(r["key"] for r in rows.to_pylist())
    want = sorted(
        [f"r0-{i}" for i in range(40)]
        + [f"r2-{i}" for i in range(40)]
        + [f"plain-{i}" for i in range(10)]
    )
    assert keys == want
    # now a transaction stays open in partition 0: records after it, even
    # committed ones outside it, wait with it
    tx.begin_transaction()
    tx.produce(topic, key=b"open", value=b"x", partition=0)
    tx.flush(30)
    plain.produce(topic, key=b"behind-open", value=b"y", partition=0)
    plain.produce(topic, key=b"other-partition", value=b"y", partition=1)
    assert plain.flush(30) == 0
    rows = tt.wait_rows(topic, 91)
    time.sleep(2.5)  # more than two commit intervals
    keys = {r["key"] for r in tt.table(topic).scan().to_arrow().to_pylist()}
    assert "other-partition" in keys
    assert "open" not in keys and "behind-open" not in keys
    snap = tt.table(topic).current_snapshot()
    assert snap is not None
    # the table's offsets for partition 0 stop at the open transaction's first record
    open_at = json.loads(snap.summary.additional_properties["tidelake.offsets"])["0"]
    # and the table is not lagging: what it cannot read yet is not committed
    status = httpx.get(f"{tt.proc.http_url}/api/v1/table-topics", timeout=10).json()
    mine = next(s for s in status if s["topic"] == topic)
    assert mine["lag_by_partition"]["0"] == 0, mine
    tx.commit_transaction(30)
    rows = tt.wait_rows(topic, 93)
    keys = sorted(r["key"] for r in rows.to_pylist())
    assert keys == sorted(want + ["open", "behind-open", "other-partition"])
    assert (
        open_at
        < json.loads(
            tt.table(topic).current_snapshot().summary.additional_properties["tidelake.offsets"]  # type: ignore[union-attr]
        )["0"]
    )
