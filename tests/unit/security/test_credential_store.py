"""One contract suite over every CredentialStore."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.metadata import MemoryMetadataStore, SqliteMetadataStore
from ingest.security import (
    CredentialStore,
    MemoryCredentialStore,
    MetadataCredentialStore,
    UserCredentialInfo,
    make_credential,
)
from ingest.security.scram import verify_password


@pytest.fixture(params=["memory", "metadata-memory", "metadata-sqlite"])
def credentials(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CredentialStore]:
    if request.param == "memory":
        yield MemoryCredentialStore()
        return
    store = (
        MemoryMetadataStore()
        if request.param == "metadata-memory"
        else SqliteMetadataStore(tmp_path / "meta.db")
    )
    yield MetadataCredentialStore(store)
    store.close()


def test_get_returns_what_put_stored(credentials: CredentialStore) -> None:
    cred = make_credential("pw", "SCRAM-SHA-256")
    assert credentials.get("alice", "SCRAM-SHA-256") is None
    credentials.put("alice", cred)
    assert credentials.get("alice", "SCRAM-SHA-256") == cred
    assert credentials.get("alice", "SCRAM-SHA-512") is None
    assert credentials.get("bob", "SCRAM-SHA-256") is None


def test_put_replaces_the_users_credential_for_that_mechanism(
    credentials: CredentialStore,
) -> None:
    credentials.put("alice", make_credential("old", "SCRAM-SHA-256"))
    credentials.put("alice", make_credential("new", "SCRAM-SHA-256", 8192))
    got = credentials.get("alice", "SCRAM-SHA-256")
    assert got is not None and got.iterations == 8192
    assert verify_password(got, "new") and not verify_password(got, "old")


def test_list_shows_users_and_mechanisms_in_order(credentials: CredentialStore) -> None:
    credentials.put("bob", make_credential("pw", "SCRAM-SHA-512"))
    credentials.put("alice", make_credential("pw", "SCRAM-SHA-512", 5000))
    credentials.put("alice", make_credential("pw", "SCRAM-SHA-256"))
    assert credentials.list() == [
        UserCredentialInfo("alice", "SCRAM-SHA-256", 4096),
        UserCredentialInfo("alice", "SCRAM-SHA-512", 5000),
        UserCredentialInfo("bob", "SCRAM-SHA-512", 4096),
    ]
    assert credentials.list("bob") == [UserCredentialInfo("bob", "SCRAM-SHA-512", 4096)]


def test_delete_one_mechanism_or_the_whole_user(credentials: CredentialStore) -> None:
    for m in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        credentials.put("alice", make_credential("pw", m))
        credentials.put("bob", make_credential("pw", m))
    assert credentials.delete("alice", "SCRAM-SHA-256")
    assert not credentials.delete("alice", "SCRAM-SHA-256")
    assert [i.mechanism for i in credentials.list("alice")] == ["SCRAM-SHA-512"]
    assert credentials.delete("bob")
    assert credentials.list("bob") == []
    assert not credentials.delete("nobody")


def test_metadata_backed_credentials_survive_reopen(tmp_path: Path) -> None:
    cred = make_credential("pw", "SCRAM-SHA-512")
    store = SqliteMetadataStore(tmp_path / "meta.db")
    MetadataCredentialStore(store).put("alice", cred)
    store.close()
    store = SqliteMetadataStore(tmp_path / "meta.db")
    assert MetadataCredentialStore(store).get("alice", "SCRAM-SHA-512") == cred
    store.close()
