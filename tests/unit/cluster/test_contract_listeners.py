"""Every broker's advertised listeners in the cluster store, over every
implementation (the contract suite's ``cluster`` fixture: memory and
PostgreSQL), and a PostgreSQL table made before listeners were registered."""

from __future__ import annotations

import psycopg2

from ingest.cluster import ListenerEndpoint
from ingest.cluster.postgres import PostgresClusterStore
from tests.support.postgres import temporary_database
from tests.unit.cluster.test_contract import LONG, Cluster, cluster

__all__ = ["cluster"]

PLAIN_1 = ListenerEndpoint("PLAINTEXT", "h1", 9001, "PLAINTEXT")
SECURE_1 = ListenerEndpoint("SASL_SSL", "secure-h1", 9101, "SASL_SSL")
INTERNAL_2 = ListenerEndpoint("INTERNAL", "10.0.0.2", 9202, "PLAINTEXT")


def test_every_client_reads_a_brokers_listeners_in_the_order_registered(cluster: Cluster) -> None:
    cluster.store.register_broker(1, "h1", 9001, "r1", "wal/1/", LONG, (PLAIN_1, SECURE_1))
    cluster.store.register_broker(2, "h2", 9002, None, "wal/2/", LONG, (INTERNAL_2,))
    other = cluster.client()
    by_node = {b.node_id: b for b in other.list_brokers()}
    assert by_node[1].listeners == (PLAIN_1, SECURE_1)
    assert by_node[2].listeners == (INTERNAL_2,)
    assert (by_node[1].host, by_node[1].port) == ("h1", 9001)  # the default listener's


def test_a_broker_registered_without_listeners_has_none(cluster: Cluster) -> None:
    cluster.store.register_broker(1, "h1", 9001, None, "wal/1/", LONG)
    assert cluster.store.list_brokers()[0].listeners == ()


def test_a_restart_replaces_the_listeners(cluster: Cluster) -> None:
    first = cluster.store.register_broker(1, "h1", 9001, None, "wal/1/", LONG, (PLAIN_1, SECURE_1))
    moved = ListenerEndpoint("SASL_SSL", "secure-h1", 9555, "SASL_SSL")
    again = cluster.store.register_broker(1, "h1", 9001, None, "wal/1/", LONG, (moved,))
    assert again.incarnation > first.incarnation
    assert again.listeners == (moved,)
    assert cluster.client().list_brokers()[0].listeners == (moved,)


def test_listeners_survive_heartbeats_and_draining(cluster: Cluster) -> None:
    info = cluster.store.register_broker(1, "h1", 9001, None, "wal/1/", LONG, (PLAIN_1, SECURE_1))
    assert cluster.store.heartbeat(1, info.incarnation, LONG)
    cluster.store.set_draining(1, info.incarnation, True)
    (b,) = cluster.store.list_brokers()
    assert b.draining
    assert b.listeners == (PLAIN_1, SECURE_1)


def test_a_table_made_before_listeners_existed_is_upgraded_in_place() -> None:
    with temporary_database("tl_cluster") as url:
        conn = psycopg2.connect(url)
        with conn.cursor() as cur:  # the table as earlier releases created it
            cur.execute(
                "CREATE TABLE cluster_brokers (node_id INTEGER PRIMARY KEY, "
                "incarnation BIGINT NOT NULL, host TEXT NOT NULL, port INTEGER NOT NULL, "
                "rack TEXT, object_prefix TEXT NOT NULL, draining BOOLEAN NOT NULL DEFAULT FALSE, "
                "expires_ms BIGINT NOT NULL)"
            )
            cur.execute(
                "INSERT INTO cluster_brokers VALUES (7, 1, 'old', 9007, NULL, 'w/', FALSE, 0)"
            )
        conn.commit()
        conn.close()
        store = PostgresClusterStore(url)
        try:
            by_node = {b.node_id: b for b in store.list_brokers()}
            assert by_node[7].listeners == ()  # the old row reads as "no listeners"
            assert (by_node[7].host, by_node[7].port) == ("old", 9007)
            store.register_broker(1, "h1", 9001, None, "wal/1/", LONG, (PLAIN_1, SECURE_1))
            by_node = {b.node_id: b for b in store.list_brokers()}
            assert by_node[1].listeners == (PLAIN_1, SECURE_1)
        finally:
            store.close()
