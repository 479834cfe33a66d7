"""Run the compatibility corpus through the HTTP API: register the history under NONE, set the
subject's level, then ask ``POST /compatibility/subjects/{s}/versions`` and try registering."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.unit.schema_registry.compat_corpus import CASES, Case


def test_corpus_covers_every_format_and_level() -> None:
    levels = {
        "BACKWARD",
        "BACKWARD_TRANSITIVE",
        "FORWARD",
        "FORWARD_TRANSITIVE",
        "FULL",
        "FULL_TRANSITIVE",
        "NONE",
    }
    for fmt in ("AVRO", "JSON", "PROTOBUF"):
        seen = {c.level for c in CASES if c.format == fmt}
        assert seen == levels, (fmt, levels - seen)
        assert any(not c.compatible for c in CASES if c.format == fmt)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_compatibility_corpus(client: TestClient, case: Case) -> None:
    subject = "corpus"
    client.put(f"/config/{subject}", json={"compatibility": "NONE"})
    for schema in case.history:
        r = client.post(
            f"/subjects/{subject}/versions", json={"schema": schema, "schemaType": case.format}
        )
        assert r.status_code == 200, r.text
    client.put(f"/config/{subject}", json={"compatibility": case.level})
    body = {"schema": case.new, "schemaType": case.format}
    r = client.post(f"/compatibility/subjects/{subject}/versions?verbose=true", json=body)
    assert r.status_code == 200, r.text
    verdict = r.json()
    assert verdict["is_compatible"] is case.compatible, (case.reason, verdict["messages"])
    if not case.compatible:
        assert verdict["messages"], "a rejection explains itself"
    registered = client.post(f"/subjects/{subject}/versions", json=body)
    assert registered.status_code == (200 if case.compatible else 409), registered.text
