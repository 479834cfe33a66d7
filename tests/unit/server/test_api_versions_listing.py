"""ApiVersions lists what clients may call: Envelope (58), which brokers send
each other for a rack-routed produce, is served but not advertised."""

from __future__ import annotations

from ingest.handlers import api_table
from ingest.handlers.api_versions import api_keys


def test_envelope_is_served_between_brokers_but_not_advertised_to_clients() -> None:
    listed = {k["api_key"] for k in api_keys()}
    assert 58 in api_table() and api_table()[58].internal
    assert 58 not in listed
    assert {0, 1, 3, 18, 22, 68} <= listed  # produce, fetch, metadata, api versions, txn, 848
    assert listed == {k for k, s in api_table().items() if not s.internal}
