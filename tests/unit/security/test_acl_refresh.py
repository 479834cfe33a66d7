"""Brokers of a cluster share ACLs through PostgreSQL: an authorizer on one
connection sees a binding another connection added within its refresh
interval (two stores on one database stand for two brokers)."""

from __future__ import annotations

import asyncio
import time

from ingest.metadata import PostgresMetadataStore
from ingest.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Authorizer,
    MetadataAclStore,
    PatternType,
    ResourceType,
)
from tests.support.postgres import temporary_database

_READ_T = AclBinding(
    ResourceType.TOPIC,
    "t",
    PatternType.LITERAL,
    "User:alice",
    "*",
    AclOperation.READ,
    AclPermissionType.ALLOW,
)


def _allowed(auth: Authorizer) -> bool:
    return auth.authorize("User:alice", "h", AclOperation.READ, ResourceType.TOPIC, "t")


async def _until(auth: Authorizer, want: bool, within_s: float) -> float:
    started = time.monotonic()
    while _allowed(auth) is not want:
        assert time.monotonic() - started < within_s, f"not {want} after {within_s} s"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


def test_a_broker_sees_acls_another_broker_changed_within_its_interval() -> None:
    with temporary_database("tl_aclrefresh") as url:
        one, two = PostgresMetadataStore(url), PostgresMetadataStore(url)
        try:
            watcher = Authorizer(MetadataAclStore(two), refresh_interval_s=0.2)

            async def scenario() -> None:
                await asyncio.to_thread(watcher.refresh)
                runner = asyncio.create_task(watcher.run())
                try:
                    assert not _allowed(watcher)
                    MetadataAclStore(one).add(_READ_T)
                    await _until(watcher, True, within_s=2.0)
                    MetadataAclStore(one).remove(AclBindingFilter(resource_name="t"))
                    await _until(watcher, False, within_s=2.0)
                finally:
                    runner.cancel()
                    await asyncio.gather(runner, return_exceptions=True)

            asyncio.run(scenario())
        finally:
            one.close()
            two.close()
