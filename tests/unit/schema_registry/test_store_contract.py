"""One contract suite for every SchemaStore; PostgreSQL reuses it from tests/integration."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from schema_registry.store import (
    MemorySchemaStore,
    Reference,
    SchemaStore,
    StoredSchema,
    SubjectVersion,
    open_store,
)


def schema(schema_id: int, text: str = "s", refs: tuple[Reference, ...] = ()) -> StoredSchema:
    return StoredSchema(schema_id, "AVRO", text, refs, f"fp-{text}")


class StoreContract:
    """Subclasses provide a ``store`` fixture yielding an empty store."""

    def test_schema_round_trip_and_fingerprint_lookup(self, store: SchemaStore) -> None:
        ref = Reference("com.X", "x", 1)
        with store.write() as tx:
            tx.add_schema(schema(1, "a", (ref,)))
        with store.read() as tx:
            assert tx.schema_by_id(1) == schema(1, "a", (ref,))
            assert tx.schema_by_id(2) is None
            assert tx.schema_id_by_fingerprint("fp-a") == 1
            assert tx.schema_id_by_fingerprint("fp-b") is None
            assert tx.schemas_referencing("x", 1) == [(".", 1)]
            assert [x.id for x in tx.schemas_by_fingerprint_prefix("fp-")] == [1]
            assert tx.schemas_by_fingerprint_prefix("fp-b") == []
            assert tx.schemas_referencing("x", 2) == []

    def test_allocated_ids_increase_and_stay_above_imported_ids(self, store: SchemaStore) -> None:
        with store.write() as tx:
            first, second = tx.allocate_id(), tx.allocate_id()
            assert second == first + 1
            tx.add_schema(schema(50, "imported"))
            assert tx.allocate_id() == 51
            tx.note_imported_id(80)
            assert tx.allocate_id() == 81

    def test_contexts_have_their_own_ids(self, store: SchemaStore) -> None:
        with store.write() as tx:
            assert tx.allocate_id() == 1
            assert tx.allocate_id(".team") == 1
            tx.add_schema(StoredSchema(1, "AVRO", "default", (), "fp", "."))
            tx.add_schema(StoredSchema(1, "JSON", "team", (), "fp", ".team"))
            tx.add_version(SubjectVersion("orders", 1, 1, False))
            tx.add_version(SubjectVersion(":.team:orders", 1, 1, False))
            assert tx.allocate_id(".team") == 2
        with store.read() as tx:
            assert tx.schema_by_id(1).schema == "default"  # type: ignore[union-attr]
            assert tx.schema_by_id(1, ".team").schema == "team"  # type: ignore[union-attr]
            assert tx.schema_by_id(1, ".other") is None
            assert tx.schema_id_by_fingerprint("fp", ".team") == 1
            assert [v.subject for v in tx.versions_of_schema(1)] == ["orders"]
            assert [v.subject for v in tx.versions_of_schema(1, ".team")] == [":.team:orders"]

    def test_versions_soft_delete_and_remove(self, store: SchemaStore) -> None:
        with store.write() as tx:
            tx.add_schema(schema(1))
            tx.add_version(SubjectVersion("b", 1, 1, False))
            tx.add_version(SubjectVersion("a", 2, 1, False))
            tx.add_version(SubjectVersion("a", 1, 1, False))
        with store.write() as tx:
            tx.set_deleted("a", 1)
        with store.read() as tx:
            assert tx.subjects() == ["a", "b"]
            assert tx.versions("a") == [
                SubjectVersion("a", 1, 1, True),
                SubjectVersion("a", 2, 1, False),
            ]
            assert [v.subject for v in tx.versions_of_schema(1)] == ["a", "a", "b"]
            assert len(tx.all_versions()) == 3
        with store.write() as tx:
            tx.remove_version("a", 1)
            tx.remove_version("a", 2)
        with store.read() as tx:
            assert tx.subjects() == ["b"]
            assert tx.versions("a") == []

    def test_config_and_mode_upsert_and_delete(self, store: SchemaStore) -> None:
        with store.write() as tx:
            tx.put_config("", {"compatibilityLevel": "FULL"})
            tx.put_config("s", {"compatibilityLevel": "NONE"})
            tx.put_config("s", {"compatibilityLevel": "FORWARD", "normalize": True})
            tx.put_mode("", "READONLY")
            tx.put_mode("", "IMPORT")
        with store.read() as tx:
            assert tx.get_config("") == {"compatibilityLevel": "FULL"}
            assert tx.get_config("s") == {"compatibilityLevel": "FORWARD", "normalize": True}
            assert tx.get_config("t") is None
            assert tx.get_mode("") == "IMPORT"
        with store.write() as tx:
            tx.delete_config("s")
            tx.delete_mode("")
        with store.read() as tx:
            assert tx.get_config("s") is None and tx.get_mode("") is None

    def test_a_failed_write_is_rolled_back(self, store: SchemaStore) -> None:
        with pytest.raises(RuntimeError), store.write() as tx:
            tx.add_schema(schema(1))
            tx.put_mode("", "READONLY")
            raise RuntimeError("boom")
        with store.read() as tx:
            assert tx.schema_by_id(1) is None and tx.get_mode("") is None

    def test_concurrent_writers_never_share_an_id(self, store: SchemaStore) -> None:
        got: list[int] = []
        lock = threading.Lock()

        def work() -> None:
            for _ in range(20):
                with store.write() as tx:
                    value = tx.allocate_id()
                    tx.add_schema(schema(value, f"t{value}"))
                with lock:
                    got.append(value)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(got) == list(range(min(got), min(got) + 80))


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def store(self) -> Iterator[SchemaStore]:
        with MemorySchemaStore() as s:
            yield s


class TestSqliteStore(StoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SchemaStore]:
        with open_store(f"sqlite:///{tmp_path}/schemas.db") as s:
            yield s

    def test_state_survives_reopening(self, tmp_path: Path) -> None:
        url = f"sqlite:///{tmp_path}/durable.db"
        with open_store(url) as s, s.write() as tx:
            tx.add_schema(schema(tx.allocate_id()))
            tx.add_version(SubjectVersion("s", 1, 1, False))
        with open_store(url) as s, s.read() as tx:
            assert tx.versions("s") == [SubjectVersion("s", 1, 1, False)]
        with open_store(url) as s, s.write() as tx:
            assert tx.allocate_id() == 2


def test_context_of_qualified_subjects() -> None:
    from schema_registry.store import context_of

    assert context_of("orders-value") == "."
    assert context_of(":.team:orders-value") == ".team"
    assert context_of(":.:orders-value") == "."
    assert context_of(":.team:") == ".team"
    assert context_of(None) == "."


def test_unknown_store_scheme_names_the_key() -> None:
    from ingest.errors import ConfigError

    with pytest.raises(ConfigError, match="store_url"):
        open_store("redis://x")
    with pytest.raises(ConfigError, match="store_url"):
        open_store("sqlite://")
