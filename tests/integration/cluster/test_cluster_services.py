"""The schema registry and the Iceberg REST catalog of a cluster: every broker
serves the same ones.

Three real brokers on one PostgreSQL database and one moto S3 bucket, with no
registry or catalog settings of their own: a schema registered through one
broker has the same id, subject and version on every other, concurrent
registrations through different brokers never share an id, a table created
through one broker loads (and scans) through another, and of two commits
made from the same table state through two brokers one wins and the other
gets 409.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.types import LongType, StringType

from tests.integration.s3stream.conftest import moto_server
from tests.support.cluster import BUCKET, TidelakeCluster, running_cluster

SR_JSON = "application/vnd.schemaregistry.v1+json"
ROWS = pa.table(
    {"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"], pa.string())}
)
NO_RETRIES = {"commit.retry.num-retries": "0"}


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, s3_endpoint: str
) -> Iterator[TidelakeCluster]:
    with running_cluster(tmp_path_factory.mktemp("services"), s3_endpoint, nodes=3) as c:
        yield c


def _avro(name: str, *fields: str) -> str:
    return json.dumps(
        {"type": "record", "name": name, "fields": [{"name": f, "type": "long"} for f in fields]}
    )


def _register(base: str, subject: str, schema: str) -> dict[str, Any]:
    r = httpx.post(
        f"{base}/subjects/{subject}/versions",
        json={"schema": schema},
        headers={"Content-Type": SR_JSON},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def _get(base: str, path: str) -> Any:
    r = httpx.get(f"{base}{path}", timeout=30)
    assert r.status_code == 200, (path, r.text)
    return r.json()


def _catalog(cluster: TidelakeCluster, node: int, s3_endpoint: str) -> RestCatalog:
    """A pyiceberg client of ``node``'s REST catalog that can also write data files
    to the cluster's bucket."""
    return RestCatalog(
        f"node{node}",
        uri=cluster.nodes[node].http_url,
        **{
            "s3.endpoint": s3_endpoint,
            "s3.region": "us-east-1",
            "s3.access-key-id": "test",
            "s3.secret-access-key": "test",
        },
    )


def test_a_schema_registered_through_one_broker_reads_the_same_through_the_others(
    cluster: TidelakeCluster,
) -> None:
    first = cluster.nodes[1].registry_url
    v1 = _register(first, "orders-value", _avro("Order", "id", "amount"))
    v2 = _register(first, "orders-value", _avro("Order", "id"))  # backward compatible
    assert v1["id"] != v2["id"]
    for node in (2, 3):
        base = cluster.nodes[node].registry_url
        assert "orders-value" in _get(base, "/subjects")
        assert _get(base, "/subjects/orders-value/versions") == [1, 2]
        latest = _get(base, "/subjects/orders-value/versions/latest")
        assert (latest["id"], latest["version"]) == (v2["id"], 2)
        by_id = _get(base, f"/schemas/ids/{v1['id']}")
        assert json.loads(by_id["schema"]) == json.loads(_avro("Order", "id", "amount"))
        # the latest schema again, through this broker: the id and version it has
        again = _register(base, "orders-value", _avro("Order", "id"))
        assert (again["id"], again["version"]) == (v2["id"], 2)
    assert _get(first, "/subjects/orders-value/versions") == [1, 2]


def test_concurrent_registrations_through_every_broker_get_unique_ids(
    cluster: TidelakeCluster,
) -> None:
    per_broker = 15
    results: dict[tuple[int, int], int] = {}
    same: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def work(node: int) -> None:
        base = cluster.nodes[node].registry_url
        try:
            start.wait(timeout=30)
            for i in range(per_broker):
                got = _register(base, f"conc-{node}-{i}", _avro(f"N{node}x{i}", "a"))
                results[(node, i)] = got["id"]
                # every broker also registers one shared schema under one subject
                shared = _register(base, "conc-shared", _avro("Shared", "a"))
                same.append((shared["id"], shared["version"]))
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert len(results) == 3 * per_broker
    assert len(set(results.values())) == 3 * per_broker, "two schemas got one id"
    assert len(set(same)) == 1, f"the same schema got several ids or versions: {set(same)}"
    shared_id = same[0][0]
    assert shared_id not in results.values()
    for node in (1, 2, 3):
        base = cluster.nodes[node].registry_url
        subjects = set(_get(base, "/subjects"))
        assert {f"conc-{n}-{i}" for n in (1, 2, 3) for i in range(per_broker)} <= subjects
        assert _get(base, "/subjects/conc-shared/versions") == [1]
        for (n, i), schema_id in results.items():
            if (n + i + node) % 5 == 0:  # a spread of them on every broker
                body = _get(base, f"/schemas/ids/{schema_id}")
                assert json.loads(body["schema"])["name"] == f"N{n}x{i}"


def test_a_table_created_through_one_broker_loads_and_scans_through_another(
    cluster: TidelakeCluster, s3_endpoint: str
) -> None:
    one = _catalog(cluster, 1, s3_endpoint)
    two = _catalog(cluster, 2, s3_endpoint)
    three = _catalog(cluster, 3, s3_endpoint)
    one.create_namespace("shared_ns")
    assert ("shared_ns",) in two.list_namespaces()
    created = one.create_table(("shared_ns", "events"), ROWS.schema)
    assert created.location().startswith("s3://"), created.location()
    loaded = two.load_table(("shared_ns", "events"))
    assert loaded.metadata_location == created.metadata_location
    assert [f.name for f in loaded.schema().fields] == ["id", "name"]
    loaded.append(ROWS)  # a commit through broker 2, data on the shared bucket
    seen = three.load_table(("shared_ns", "events"))
    assert len(seen.snapshots()) == 1
    assert seen.scan().to_arrow().num_rows == 3
    assert ("shared_ns", "events") in one.list_tables("shared_ns")


def test_of_two_commits_through_two_brokers_from_one_state_one_wins_and_one_gets_409(
    cluster: TidelakeCluster, s3_endpoint: str
) -> None:
    one = _catalog(cluster, 1, s3_endpoint)
    two = _catalog(cluster, 2, s3_endpoint)
    one.create_namespace("conflict_ns")
    one.create_table(("conflict_ns", "t"), ROWS.schema, properties=NO_RETRIES)
    via_one = one.load_table(("conflict_ns", "t"))
    via_two = two.load_table(("conflict_ns", "t"))

    # schema changes: the loser's requirement (the current schema id) is stale
    with via_one.update_schema() as update:
        update.add_column("from_one", StringType())
    with pytest.raises(CommitFailedException), via_two.update_schema() as update:
        update.add_column("from_two", LongType())

    # appends: the loser's branch head is stale
    via_one = one.load_table(("conflict_ns", "t"))
    via_two = two.load_table(("conflict_ns", "t"))
    via_one.append(ROWS.append_column("from_one", pa.array(["x"] * 3, pa.string())))
    with pytest.raises(CommitFailedException):
        via_two.append(ROWS.append_column("from_one", pa.array(["y"] * 3, pa.string())))

    final = _catalog(cluster, 3, s3_endpoint).load_table(("conflict_ns", "t"))
    assert [f.name for f in final.schema().fields] == ["id", "name", "from_one"]
    assert len(final.snapshots()) == 1
    assert final.scan().to_arrow().column("from_one").to_pylist() == ["x"] * 3


def test_a_stale_commit_through_another_broker_is_answered_409_on_the_wire(
    cluster: TidelakeCluster, s3_endpoint: str
) -> None:
    one = _catalog(cluster, 1, s3_endpoint)
    one.create_namespace("wire_ns")
    table = one.create_table(("wire_ns", "t"), ROWS.schema, properties=NO_RETRIES)
    stale_schema_id = table.schema().schema_id
    with table.update_schema() as update:
        update.add_column("extra", StringType())
    body = {
        "requirements": [
            {"type": "assert-current-schema-id", "current-schema-id": stale_schema_id}
        ],
        "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
    }
    r = httpx.post(
        f"{cluster.nodes[2].http_url}/v1/namespaces/wire_ns/tables/t", json=body, timeout=30
    )
    assert r.status_code == 409, r.text
    assert r.json()["error"]["type"] == "CommitFailedException"
    assert "k" not in one.load_table(("wire_ns", "t")).properties


def test_each_broker_says_at_start_which_registry_store_and_catalog_it_uses(
    cluster: TidelakeCluster,
) -> None:
    for node in cluster.nodes.values():
        text = node.log_path.read_text(errors="replace")
        assert "schema registry store postgresql://" in text, node.log_tail()
        assert "?schema=tidelake_registry" in text
        assert "sql catalog 'tidelake' at postgresql+psycopg2://" in text
        assert f"(warehouse s3://{BUCKET}/{cluster.prefix}/warehouse)" in text


def _append_racing(table: Any, start: threading.Barrier, outcomes: list[str]) -> None:
    start.wait(timeout=30)
    try:
        table.append(ROWS)
        outcomes.append("won")
    except CommitFailedException:
        outcomes.append("409")
    except BaseException as exc:  # anything else fails the test
        outcomes.append(repr(exc))


def test_racing_commits_through_two_brokers_from_one_state_exactly_one_wins_each_round(
    cluster: TidelakeCluster, s3_endpoint: str
) -> None:
    """Both requests pass their requirement checks at about the same time on two
    brokers; the compare-and-set on the table's pointer in PostgreSQL lets one
    through. Whatever the interleaving, one wins and the other gets 409."""
    catalogs = [_catalog(cluster, 1, s3_endpoint), _catalog(cluster, 2, s3_endpoint)]
    catalogs[0].create_namespace("race_ns")
    catalogs[0].create_table(("race_ns", "t"), ROWS.schema, properties=NO_RETRIES)
    rounds = 5
    for _ in range(rounds):
        tables = [c.load_table(("race_ns", "t")) for c in catalogs]
        assert tables[0].metadata_location == tables[1].metadata_location
        outcomes: list[str] = []
        start = threading.Barrier(2)
        threads = [
            threading.Thread(target=_append_racing, args=(t, start, outcomes)) for t in tables
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert sorted(outcomes) == ["409", "won"], outcomes
    final = _catalog(cluster, 3, s3_endpoint).load_table(("race_ns", "t"))
    assert len(final.snapshots()) == rounds
    assert final.scan().to_arrow().num_rows == 3 * rounds
