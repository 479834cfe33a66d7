"""Load reports in the cluster store, over every implementation (the contract
suite's ``cluster`` fixture: memory and PostgreSQL)."""

from __future__ import annotations

from ingest.cluster.api import PartitionLoad
from tests.unit.cluster.test_contract import LONG, Cluster, cluster

__all__ = ["cluster"]


def test_a_report_replaces_the_brokers_previous_one_and_every_client_reads_it(
    cluster: Cluster,
) -> None:
    one = cluster.store.register_broker(1, "h", 1, None, "n1/", LONG)
    cluster.store.register_broker(2, "h", 2, "b", "n2/", LONG)
    other = cluster.client()
    assert cluster.store.report_load(1, one.incarnation, {("t", 0): PartitionLoad(10.5, 2.0)})
    assert cluster.store.report_load(
        1, one.incarnation, {("t", 1): PartitionLoad(3.0, 0.0), ("u", 0): PartitionLoad(0.0, 7.0)}
    )
    loads = other.loads()
    assert set(loads) == {1}  # node 2 never reported
    assert dict(loads[1].partitions) == {
        ("t", 1): PartitionLoad(3.0, 0.0),
        ("u", 0): PartitionLoad(0.0, 7.0),
    }
    assert loads[1].node_id == 1
    assert abs(loads[1].reported_ms - other.now_ms()) < 5_000


def test_reports_are_not_changes(cluster: Cluster) -> None:
    one = cluster.store.register_broker(1, "h", 1, None, "n1/", LONG)
    before = cluster.store.version()
    cluster.store.report_load(1, one.incarnation, {("t", 0): PartitionLoad(1.0, 1.0)})
    assert cluster.store.version() == before


def test_a_replaced_incarnation_cannot_report_and_its_old_report_is_gone(
    cluster: Cluster,
) -> None:
    old = cluster.store.register_broker(1, "h", 1, None, "n1/", LONG)
    assert cluster.store.report_load(1, old.incarnation, {("t", 0): PartitionLoad(5.0, 0.0)})
    new = cluster.store.register_broker(1, "h", 1, None, "n1/", LONG)  # a restart
    assert cluster.store.loads() == {}
    assert not cluster.store.report_load(1, old.incarnation, {("t", 0): PartitionLoad(9.0, 0.0)})
    assert cluster.store.loads() == {}
    assert cluster.store.report_load(1, new.incarnation, {})
    assert dict(cluster.store.loads()[1].partitions) == {}


def test_an_unregistered_broker_has_no_load_and_an_unknown_one_cannot_report(
    cluster: Cluster,
) -> None:
    one = cluster.store.register_broker(1, "h", 1, None, "n1/", LONG)
    two = cluster.store.register_broker(2, "h", 2, None, "n2/", LONG)
    cluster.store.report_load(1, one.incarnation, {("t", 0): PartitionLoad(5.0, 0.0)})
    cluster.store.report_load(2, two.incarnation, {("t", 1): PartitionLoad(6.0, 0.0)})
    cluster.store.unregister_broker(1, one.incarnation)
    assert set(cluster.store.loads()) == {2}
    assert not cluster.store.report_load(7, 1, {("t", 0): PartitionLoad(1.0, 0.0)})
