"""Every API with the authorizer on (``authorizer = "acl"``): well-formed and
random requests from an anonymous client that may do some things and not
others still get a response that encodes, or a clean close. The refusal
paths the ACLs add to each handler run here."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingest.broker import Broker
from ingest.config import BrokerConfig
from ingest.metadata.memory import MemoryMetadataStore
from ingest.s3stream import MemoryStreamEngine
from ingest.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    MetadataAclStore,
    PatternType,
    ResourceType,
)
from ingest.security.quota import MetadataQuotaStore, QuotaEntity
from ingest.server.dispatcher import Dispatcher
from tests.fuzz.conftest import fuzz_settings
from tests.fuzz.frames import GROUP, TOPICS, random_frame, request_frame, served_versions
from tests.fuzz.test_handler_fuzz import _acks, _Harness

VERSIONS = served_versions()


def _grant(kind: ResourceType, name: str, op: AclOperation) -> AclBinding:
    return AclBinding(
        kind, name, PatternType.LITERAL, "User:ANONYMOUS", "*", op, AclPermissionType.ALLOW
    )


class _AclHarness(_Harness):
    """The fuzz harness's broker, with ACLs: anonymous may read and write the
    first topic and use the group, nothing else; and a produce quota."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        config = BrokerConfig(
            port=0,
            fetch_max_wait_cap_ms=200,
            group_min_session_timeout_ms=10,
            group_max_session_timeout_ms=2000,
            group_initial_rebalance_delay_ms=0,
            authorizer="acl",
        )
        store = MemoryMetadataStore()
        acls = MetadataAclStore(store)
        for op in (AclOperation.READ, AclOperation.WRITE):
            acls.add(_grant(ResourceType.TOPIC, TOPICS[0], op))
        acls.add(_grant(ResourceType.GROUP, GROUP, AclOperation.READ))
        acls.add(_grant(ResourceType.TRANSACTIONAL_ID, "*", AclOperation.DESCRIBE))
        MetadataQuotaStore(store).alter(
            QuotaEntity.of([("client-id", None)]), {"consumer_byte_rate": 1e12}, []
        )
        self.broker = Broker(config, store, MemoryStreamEngine())
        self.broker.quotas.refresh()
        self.loop.run_until_complete(self._start())
        self.dispatcher = Dispatcher(self.broker)


@pytest.fixture(scope="module")
def harness() -> Iterator[_AclHarness]:
    logging.getLogger("ingest").setLevel(logging.WARNING)
    h = _AclHarness()
    try:
        yield h
    finally:
        h.close()


@fuzz_settings(len(VERSIONS))
@given(st.data())
def test_well_formed_requests_are_answered_with_acls_on(
    harness: _AclHarness, data: st.DataObject
) -> None:
    api_key, version = data.draw(st.sampled_from(VERSIONS))
    frame = data.draw(request_frame(api_key, version, mutate=False))
    outcome = harness.dispatch(frame)
    if api_key == 0 and outcome == "failed without response":
        # a Produce with acks=0 that fails (null records, a denied topic)
        # closes the connection: Kafka's only way to tell such a producer
        assert _acks(frame) == 0
        return
    assert outcome in ("response", "no response")


@fuzz_settings(len(VERSIONS))
@given(st.data())
def test_mutated_requests_get_a_response_or_a_clean_close_with_acls_on(
    harness: _AclHarness, data: st.DataObject
) -> None:
    api_key, version = data.draw(st.sampled_from(VERSIONS))
    harness.dispatch(data.draw(request_frame(api_key, version, mutate=True)))
    harness.dispatch(data.draw(random_frame(api_key, version)))
