"""Settings, and the registry's answers when its store fails."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from schema_registry.app import RegistrySettings, create_app
from schema_registry.errors import StoreError
from schema_registry.store import MemorySchemaStore, StoreTransaction


def test_settings_read_the_tidelake_registry_env_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDELAKE_REGISTRY_STORE_URL", "memory://")
    monkeypatch.setenv("TIDELAKE_REGISTRY_MAX_BODY_BYTES", "1234")
    settings = RegistrySettings()
    assert settings.store_url == "memory://" and settings.max_body_bytes == 1234


def test_invalid_settings_name_the_key() -> None:
    with pytest.raises(ValidationError, match="store_url"):
        RegistrySettings(store_url="redis://localhost")
    with pytest.raises(ValidationError, match="max_body_bytes"):
        RegistrySettings(store_url="memory://", max_body_bytes=0)


class FlakyStore(MemorySchemaStore):
    """Fails reads while ``broken`` is set."""

    broken = False

    def read(self) -> AbstractContextManager[StoreTransaction]:
        if self.broken:
            raise StoreError("Error in the backend data store: connection lost")
        return super().read()


@contextmanager
def flaky_client() -> Iterator[tuple[TestClient, FlakyStore]]:
    store = FlakyStore()
    app = create_app(RegistrySettings(store_url="memory://"), store=store)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, store


def test_store_failure_is_50001_and_the_registry_recovers() -> None:
    with flaky_client() as (client, store):
        store.broken = True
        r = client.get("/subjects")
        assert r.status_code == 500 and r.json()["error_code"] == 50001
        store.broken = False
        assert client.get("/subjects").json() == []


def test_unexpected_exceptions_are_answered_in_confluent_shape() -> None:
    with flaky_client() as (client, store):
        store.read = None  # type: ignore[method-assign,assignment]
        r = client.get("/subjects")
        assert r.status_code == 500 and r.json()["error_code"] == 50001
