"""Client quotas: entities, one contract suite over every QuotaStore, Kafka's
precedence of quota entities, and the rate and throttle arithmetic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.metadata import MemoryMetadataStore, PostgresMetadataStore, SqliteMetadataStore
from ingest.metadata.api import MetadataStore
from ingest.security.quota import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    InvalidQuota,
    MemoryQuotaStore,
    MetadataQuotaStore,
    QuotaEntity,
    QuotaStore,
    check_values,
)
from ingest.security.quota_manager import QuotaManager
from tests.support.postgres import temporary_database

ALICE = QuotaEntity.of([("user", "alice")])
ALICE_APP = QuotaEntity.of([("user", "alice"), ("client-id", "app")])
DEFAULT_USER = QuotaEntity.of([("user", None)])
APP = QuotaEntity.of([("client-id", "app")])


@pytest.fixture(params=["memory", "metadata-memory", "metadata-sqlite", "metadata-postgres"])
def quotas(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[QuotaStore]:
    if request.param == "memory":
        yield MemoryQuotaStore()
        return
    if request.param == "metadata-postgres":
        with temporary_database("tl_quota") as url:
            pg = PostgresMetadataStore(url)
            yield MetadataQuotaStore(pg)
            pg.close()
        return
    store: MetadataStore = (
        MemoryMetadataStore()
        if request.param == "metadata-memory"
        else SqliteMetadataStore(tmp_path / "meta.db")
    )
    yield MetadataQuotaStore(store)
    store.close()


def test_alter_sets_and_removes_keys_and_forgets_empty_entities(quotas: QuotaStore) -> None:
    v0 = quotas.version()
    quotas.alter(ALICE, {PRODUCER_BYTE_RATE: 1000.0, CONSUMER_BYTE_RATE: 2000.0}, [])
    quotas.alter(DEFAULT_USER, {PRODUCER_BYTE_RATE: 10.0}, [])
    assert quotas.entries() == {
        ALICE: {PRODUCER_BYTE_RATE: 1000.0, CONSUMER_BYTE_RATE: 2000.0},
        DEFAULT_USER: {PRODUCER_BYTE_RATE: 10.0},
    }
    v1 = quotas.version()
    assert v1 != v0
    quotas.alter(ALICE, {}, [PRODUCER_BYTE_RATE])
    assert quotas.entries()[ALICE] == {CONSUMER_BYTE_RATE: 2000.0}
    quotas.alter(ALICE, {}, [CONSUMER_BYTE_RATE])
    assert ALICE not in quotas.entries()
    assert quotas.version() not in (v0, v1)


def test_entities_and_values_kafka_refuses() -> None:
    with pytest.raises(InvalidQuota):
        QuotaEntity.of([("ip", "1.2.3.4")])
    with pytest.raises(InvalidQuota):
        QuotaEntity.of([("user", "a"), ("user", "b")])
    with pytest.raises(InvalidQuota):
        QuotaEntity.of([])
    with pytest.raises(InvalidQuota):
        check_values({"request_percentage": 50.0})
    with pytest.raises(InvalidQuota):
        check_values({PRODUCER_BYTE_RATE: 0.0})
    assert QuotaEntity.of([("client-id", None)]).parts() == [("client-id", None)]


def test_the_most_specific_entity_that_sets_the_key_wins() -> None:
    store = MemoryQuotaStore()
    store.alter(APP, {PRODUCER_BYTE_RATE: 1.0}, [])
    store.alter(DEFAULT_USER, {PRODUCER_BYTE_RATE: 2.0, CONSUMER_BYTE_RATE: 20.0}, [])
    store.alter(ALICE, {PRODUCER_BYTE_RATE: 3.0}, [])
    store.alter(ALICE_APP, {PRODUCER_BYTE_RATE: 4.0}, [])
    manager = QuotaManager(store)
    manager.refresh()
    assert manager.quota_for(PRODUCER_BYTE_RATE, "alice", "app") == (ALICE_APP, 4.0)
    assert manager.quota_for(PRODUCER_BYTE_RATE, "alice", "other") == (ALICE, 3.0)
    assert manager.quota_for(PRODUCER_BYTE_RATE, "bob", "app") == (DEFAULT_USER, 2.0)
    # alice sets no consumer quota: the default user's applies
    assert manager.quota_for(CONSUMER_BYTE_RATE, "alice", "app") == (DEFAULT_USER, 20.0)
    store.alter(DEFAULT_USER, {}, [PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE])
    manager.refresh()
    assert manager.quota_for(PRODUCER_BYTE_RATE, "bob", "app") == (APP, 1.0)
    assert manager.quota_for(CONSUMER_BYTE_RATE, "bob", "app") is None


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_within_the_quota_no_throttle_past_it_the_time_to_fall_back() -> None:
    store = MemoryQuotaStore()
    store.alter(ALICE, {PRODUCER_BYTE_RATE: 1000.0}, [])
    clock = _Clock()
    manager = QuotaManager(store, window_s=1.0, samples=11, clock=clock)
    manager.refresh()
    assert manager.active
    # 10 windows at exactly the quota: never throttled
    for _ in range(10):
        assert manager.record(PRODUCER_BYTE_RATE, "alice", "any", 1000) == 0.0
        clock.now += 1.0
    # a burst of 10,000 more bytes: the rate is 20,000 bytes over 10 s = 2000/s,
    # twice the quota: wait (2000 - 1000) / 1000 * 10 s = 10 s
    throttle = manager.record(PRODUCER_BYTE_RATE, "alice", "any", 10_000)
    assert throttle == pytest.approx(10.0, rel=0.01)
    # another user is not counted against alice's quota
    assert manager.record(PRODUCER_BYTE_RATE, "bob", "any", 10**9) == 0.0


def test_a_first_burst_is_spread_over_the_whole_window_span() -> None:
    store = MemoryQuotaStore()
    store.alter(APP, {CONSUMER_BYTE_RATE: 100.0}, [])
    manager = QuotaManager(store, window_s=0.1, samples=11, clock=_Clock())
    manager.refresh()
    # the span is at least (samples - 1) windows = 1 s: 100 bytes is at the quota
    assert manager.record(CONSUMER_BYTE_RATE, "u", "app", 100) == 0.0
    assert manager.record(CONSUMER_BYTE_RATE, "u", "app", 100) == pytest.approx(1.0)


def test_without_quotas_nothing_is_counted() -> None:
    manager = QuotaManager(MemoryQuotaStore())
    manager.refresh()
    assert not manager.active
    assert manager.record(PRODUCER_BYTE_RATE, "alice", "app", 10**9) == 0.0


def test_requests_arriving_together_are_admitted_at_the_quotas_pace() -> None:
    """A client with many requests in flight: each waits until its bytes fit
    the quota, after a first burst of one span's worth (1 s here)."""
    store = MemoryQuotaStore()
    store.alter(APP, {PRODUCER_BYTE_RATE: 1000.0}, [])
    manager = QuotaManager(store, window_s=0.1, samples=11, clock=_Clock())
    manager.refresh()
    waits = [manager.record(PRODUCER_BYTE_RATE, "u", "app", 500) for _ in range(10)]
    # cumulative 500, 1000, ... 5000 bytes at 1000 bytes/s: ready at 0.5, 1, ... 5 s,
    # minus the 1 s burst
    assert waits == pytest.approx([max(0.0, 0.5 * (k + 1) - 1.0) for k in range(10)])
