"""A partition's transaction state: ongoing transactions, LSO, aborted index, checkpoints."""

from __future__ import annotations

from ingest.log.txn_state import AbortedTxn, TxnCheckpoint, TxnState


def test_the_lso_is_the_first_offset_of_the_oldest_ongoing_transaction() -> None:
    s = TxnState()
    assert s.last_stable_offset(10) == 10
    s.on_transactional_batch(1, 2)
    s.on_transactional_batch(2, 4)
    s.on_transactional_batch(1, 6)  # same transaction: its first offset stays 2
    assert s.last_stable_offset(10) == 2
    assert s.on_marker(1, True, 7) is None  # commit: nothing indexed
    assert s.last_stable_offset(10) == 4
    assert s.on_marker(2, False, 8) == AbortedTxn(2, 4, 8)
    assert s.last_stable_offset(10) == 10


def test_the_lso_never_passes_the_high_watermark() -> None:
    s = TxnState()
    s.on_transactional_batch(1, 12)  # appended, not yet durable
    assert s.last_stable_offset(10) == 10


def test_a_marker_without_an_ongoing_transaction_indexes_nothing() -> None:
    s = TxnState()
    assert s.on_marker(5, False, 3) is None
    assert s.aborted == []


def test_aborted_transactions_are_those_whose_range_meets_the_fetch_range() -> None:
    s = TxnState()
    for pid, first, marker in ((1, 0, 3), (2, 4, 9), (3, 5, 6), (1, 10, 12)):
        s.on_transactional_batch(pid, first)
        s.on_marker(pid, False, marker)
    assert s.aborted_between(0, 1) == [AbortedTxn(1, 0, 3)]
    assert s.aborted_between(3, 5) == [AbortedTxn(1, 0, 3), AbortedTxn(2, 4, 9)]
    assert s.aborted_between(7, 10) == [AbortedTxn(2, 4, 9)]
    assert s.aborted_between(7, 11) == [AbortedTxn(2, 4, 9), AbortedTxn(1, 10, 12)]
    assert s.aborted_between(13, 20) == []


def test_trim_forgets_aborted_transactions_below_the_log_start() -> None:
    s = TxnState()
    for pid, first, marker in ((1, 0, 3), (2, 2, 6)):
        s.on_transactional_batch(pid, first)
        s.on_marker(pid, False, marker)
    assert s.trim(4)
    assert s.aborted == [AbortedTxn(2, 2, 6)]
    assert not s.trim(4)


def test_coordinator_epochs_below_the_last_seen_are_stale() -> None:
    s = TxnState()
    s.on_marker(1, True, 0, coordinator_epoch=3)
    assert s.stale_coordinator(1, 2)
    assert not s.stale_coordinator(1, 3)
    assert not s.stale_coordinator(2, 0)


def test_a_checkpoint_keeps_ongoing_and_not_yet_durable_transactions_above_its_stable_offset() -> (
    None
):
    s = TxnState()
    s.on_transactional_batch(1, 0)
    s.on_marker(1, False, 2)  # durable below hw 5
    s.on_transactional_batch(2, 3)
    s.on_marker(2, False, 6)  # marker not durable yet (hw 5)
    s.on_transactional_batch(3, 7)  # ongoing
    cp = s.checkpoint(5)
    assert cp == TxnCheckpoint(3, (AbortedTxn(1, 0, 2),))
    # once the marker is durable, only the ongoing transaction holds it back
    assert s.checkpoint(8) == TxnCheckpoint(7, (AbortedTxn(1, 0, 2), AbortedTxn(2, 3, 6)))


def test_restoring_a_checkpoint_and_replaying_from_its_stable_offset_rebuilds_the_state() -> None:
    live = TxnState()
    events = [("b", 1, 0), ("b", 2, 1), ("m", 1, 4, False), ("b", 3, 5), ("m", 2, 6, False)]
    events += [("m", 3, 7, True), ("b", 1, 8)]
    cp = None
    for i, e in enumerate(events):
        if e[0] == "b":
            live.on_transactional_batch(e[1], e[2])
        else:
            live.on_marker(e[1], bool(e[3]), e[2])
        if i == 3:
            cp = live.checkpoint(6)  # the state part-way through
    # producer 1's transaction [0, 4] contains the LSO (1): the checkpoint starts before it
    assert cp == TxnCheckpoint(0, ())
    rebuilt = TxnState.restore(cp)
    for e in events:
        if e[2] < cp.stable_offset:
            continue
        if e[0] == "b":
            rebuilt.on_transactional_batch(e[1], e[2])
        else:
            rebuilt.on_marker(e[1], bool(e[3]), e[2])
    assert rebuilt.aborted == live.aborted == [AbortedTxn(1, 0, 4), AbortedTxn(2, 1, 6)]
    assert rebuilt.ongoing == live.ongoing == {1: 8}


def test_a_checkpoint_never_falls_inside_an_ended_transaction() -> None:
    s = TxnState()
    s.on_transactional_batch(3, 0)
    s.on_transactional_batch(1, 1)  # still open: the LSO is 1
    s.on_transactional_batch(3, 2)
    s.on_marker(3, False, 3)  # producer 3's transaction [0, 3] contains the LSO
    cp = s.checkpoint(4)
    assert cp == TxnCheckpoint(0, ())
    rebuilt = TxnState.restore(cp)  # replaying from 0 sees producer 3 from its first batch
    for pid, offset in ((3, 0), (1, 1), (3, 2)):
        rebuilt.on_transactional_batch(pid, offset)
    rebuilt.on_marker(3, False, 3)
    assert rebuilt.aborted == s.aborted == [AbortedTxn(3, 0, 3)]


def test_a_long_aborted_transaction_is_listed_for_every_range_it_spans() -> None:
    s = TxnState()
    s.on_transactional_batch(1, 0)  # open across the whole log
    s.on_transactional_batch(2, 50)
    s.on_marker(2, False, 60)
    s.on_marker(1, False, 100)
    for a in range(3, 40):  # many short ones after it
        s.on_transactional_batch(a, 100 + 2 * a)
        s.on_marker(a, False, 101 + 2 * a)
    assert s.aborted_between(70, 80) == [AbortedTxn(1, 0, 100)]
    assert s.aborted_between(55, 56) == [AbortedTxn(2, 50, 60), AbortedTxn(1, 0, 100)]
    assert s.aborted_between(100, 107) == [AbortedTxn(1, 0, 100), AbortedTxn(3, 106, 107)]
    assert s.aborted_between(500, 600) == []
    restored = TxnState.restore(s.checkpoint(1000))
    assert restored.aborted_between(70, 80) == [AbortedTxn(1, 0, 100)]
