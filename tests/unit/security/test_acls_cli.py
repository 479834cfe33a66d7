"""``tidelake acls``: ACL bindings written to the metadata store directly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from api.cli import main
from ingest.metadata import SqliteMetadataStore
from ingest.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    MetadataAclStore,
    PatternType,
    ResourceType,
)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["acls", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_add_list_remove(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path / "data")
    code, out, _ = _run(
        capsys, "add", "--allow", "User:alice", "--operation", "read", "--operation", "write",
        "--topic", "orders", "--data-dir", d,
    )  # fmt: skip
    assert code == 0 and out.count("added") == 2
    code, _, _ = _run(
        capsys, "add", "--deny", "User:*", "--operation", "all", "--group", "app-", "--prefixed",
        "--data-dir", d,
    )  # fmt: skip
    assert code == 0
    store = SqliteMetadataStore(tmp_path / "data" / "metadata.db")
    try:
        assert MetadataAclStore(store).list() == [
            AclBinding(
                ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                AclOperation.READ, AclPermissionType.ALLOW,
            ),
            AclBinding(
                ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                AclOperation.WRITE, AclPermissionType.ALLOW,
            ),
            AclBinding(
                ResourceType.GROUP, "app-", PatternType.PREFIXED, "User:*", "*",
                AclOperation.ALL, AclPermissionType.DENY,
            ),
        ]  # fmt: skip
    finally:
        store.close()
    code, out, _ = _run(capsys, "list", "--principal", "User:*", "--json", "--data-dir", d)
    assert code == 0
    assert json.loads(out) == [
        {
            "resource_type": "GROUP",
            "resource_name": "app-",
            "pattern_type": "PREFIXED",
            "principal": "User:*",
            "host": "*",
            "operation": "ALL",
            "permission": "DENY",
        }
    ]
    code, out, _ = _run(
        capsys, "remove", "--topic", "orders", "--operation", "write", "--data-dir", d
    )
    assert code == 0 and "WRITE" in out and "READ" not in out
    code, out, _ = _run(capsys, "list", "--data-dir", d)
    assert "TOPIC:orders" in out and "WRITE" not in out


def test_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path / "data")
    code, _, err = _run(capsys, "add", "--allow", "alice", "--operation", "read", "--topic", "t",
                        "--data-dir", d)  # fmt: skip
    assert code == 2 and "TYPE:NAME" in err
    code, _, err = _run(capsys, "add", "--allow", "User:a", "--operation", "read", "--data-dir", d)
    assert code == 2 and "name a resource" in err
    code, _, err = _run(capsys, "remove", "--topic", "nothing", "--data-dir", d)
    assert code == 1 and "no ACL matches" in err
