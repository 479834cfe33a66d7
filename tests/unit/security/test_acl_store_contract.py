"""One contract suite over every AclStore: in memory, and on the metadata
store (memory, SQLite, PostgreSQL with one database per test)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.metadata import MemoryMetadataStore, PostgresMetadataStore, SqliteMetadataStore
from ingest.metadata.api import MetadataStore
from ingest.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclStore,
    MemoryAclStore,
    MetadataAclStore,
    PatternType,
    ResourceType,
)
from tests.support.postgres import temporary_database

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def _b(
    name: str = "orders",
    principal: str = "User:alice",
    op: AclOperation = AclOperation.READ,
    perm: AclPermissionType = ALLOW,
    kind: ResourceType = ResourceType.TOPIC,
    pattern: PatternType = PatternType.LITERAL,
    host: str = "*",
) -> AclBinding:
    return AclBinding(kind, name, pattern, principal, host, op, perm)


@pytest.fixture(params=["memory", "metadata-memory", "metadata-sqlite", "metadata-postgres"])
def acls(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AclStore]:
    if request.param == "memory":
        yield MemoryAclStore()
        return
    if request.param == "metadata-postgres":
        with temporary_database("tl_acl") as url:
            pg = PostgresMetadataStore(url)
            yield MetadataAclStore(pg)
            pg.close()
        return
    store: MetadataStore = (
        MemoryMetadataStore()
        if request.param == "metadata-memory"
        else SqliteMetadataStore(tmp_path / "meta.db")
    )
    yield MetadataAclStore(store)
    store.close()


def test_add_stores_a_binding_once(acls: AclStore) -> None:
    assert acls.add(_b()) is True
    assert acls.add(_b()) is False
    assert acls.list() == [_b()]


def test_list_is_sorted_and_filtered(acls: AclStore) -> None:
    bindings = [
        _b("payments", "User:bob", AclOperation.WRITE),
        _b("orders"),
        _b("app-", pattern=PatternType.PREFIXED),
        _b("g1", kind=ResourceType.GROUP),
        _b("orders", "User:bob", AclOperation.READ, DENY, host="10.0.0.1"),
    ]
    for b in bindings:
        acls.add(b)
    assert acls.list() == sorted(bindings)
    assert acls.list(AclBindingFilter(resource_type=ResourceType.GROUP)) == [bindings[3]]
    assert acls.list(AclBindingFilter(principal="User:bob")) == sorted([bindings[0], bindings[4]])
    assert acls.list(AclBindingFilter(permission=DENY)) == [bindings[4]]
    # MATCH: every binding that applies to topic app-orders
    match = AclBindingFilter(ResourceType.TOPIC, "app-orders", PatternType.MATCH)
    assert acls.list(match) == [bindings[2]]


def test_remove_deletes_what_the_filter_matches_and_returns_it(acls: AclStore) -> None:
    a, b, c = _b("orders"), _b("orders", op=AclOperation.WRITE), _b("other")
    for x in (a, b, c):
        acls.add(x)
    gone = acls.remove(AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL))
    assert sorted(gone) == sorted([a, b])
    assert acls.list() == [c]
    assert acls.remove(AclBindingFilter(resource_name="nothing")) == []


def test_version_moves_with_every_change_and_only_then(acls: AclStore) -> None:
    v0 = acls.version()
    acls.add(_b())
    v1 = acls.version()
    assert v1 != v0
    acls.add(_b())  # already there: no change
    assert acls.version() == v1
    acls.remove(AclBindingFilter(resource_name="missing"))
    assert acls.version() == v1
    acls.remove(AclBindingFilter())
    assert acls.version() not in (v0, v1) and acls.list() == []


def test_sqlite_bindings_survive_reopening(tmp_path: Path) -> None:
    store = SqliteMetadataStore(tmp_path / "meta.db")
    MetadataAclStore(store).add(_b(principal="User:*"))
    store.close()
    again = SqliteMetadataStore(tmp_path / "meta.db")
    assert MetadataAclStore(again).list() == [_b(principal="User:*")]
    again.close()
