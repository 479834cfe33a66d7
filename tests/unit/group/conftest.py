"""Fixtures for driving the group coordinator with a hand-moved clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from ingest.group import GroupConfig, GroupCoordinator, JoinGroupResult, SyncGroupResult
from ingest.metadata.memory import MemoryMetadataStore

SESSION_MS = 200
REBALANCE_MS = 300


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Harness:
    coord: GroupCoordinator
    clock: FakeClock
    store: MemoryMetadataStore

    async def advance(self, ms: float) -> None:
        """Move the clock, fire due timers, and let woken coroutines run."""
        self.clock.now += ms / 1000
        self.coord.run_due_timers()
        await settle()

    def join(
        self,
        member_id: str = "",
        *,
        group: str = "g",
        instance: str | None = None,
        protocols: list[tuple[str, bytes]] | None = None,
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        client_id: str = "client",
        require_known: bool = False,
        protocol_type: str = "consumer",
    ) -> asyncio.Task[JoinGroupResult]:
        return asyncio.create_task(
            self.coord.join_group(
                group_id=group,
                member_id=member_id,
                group_instance_id=instance,
                protocol_type=protocol_type,
                protocols=protocols if protocols is not None else [("range", b"meta")],
                session_timeout_ms=session_ms,
                rebalance_timeout_ms=rebalance_ms,
                client_id=client_id,
                client_host="/127.0.0.1",
                require_known_member_id=require_known,
            )
        )

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group: str = "g",
        instance: str | None = None,
    ) -> asyncio.Task[SyncGroupResult]:
        return asyncio.create_task(
            self.coord.sync_group(
                group_id=group,
                generation_id=generation,
                member_id=member_id,
                group_instance_id=instance,
                protocol_type="consumer",
                protocol_name=None,
                assignments=assignments or {},
            )
        )

    async def heartbeat(
        self, member_id: str, generation: int, *, group: str = "g", instance: str | None = None
    ) -> int:
        return await self.coord.heartbeat(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
        )

    async def commit(
        self,
        member_id: str,
        generation: int,
        offsets: list[tuple[str, int, int, int, str | None]],
        *,
        group: str = "g",
        instance: str | None = None,
    ) -> dict[tuple[str, int], int]:
        return await self.coord.commit_offsets(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
            offsets=offsets,
        )

    async def form_group(self, n: int, *, group: str = "g") -> list[JoinGroupResult]:
        """``n`` members joined and synced: a Stable group at one generation."""
        first = await self.join(group=group)
        results = [first]
        for _ in range(n - 1):
            new = self.join(group=group)
            await settle()
            rejoins = [self.join(r.member_id, group=group) for r in results]
            results = [await t for t in rejoins] + [await new]
        gen = results[0].generation_id
        leader = results[0].leader
        syncs = [
            self.sync(
                r.member_id,
                gen,
                {m.member_id: m.member_id.encode() for m in r.members}
                if r.member_id == leader
                else None,
                group=group,
            )
            for r in results
        ]
        for s in syncs:
            assert (await s).error_code == 0
        return results


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def make_config(**overrides: object) -> GroupConfig:
    values: dict[str, object] = {
        "group_min_session_timeout_ms": 10,
        "group_max_session_timeout_ms": 60_000,
        "group_initial_rebalance_delay_ms": 0,
    }
    values.update(overrides)
    return GroupConfig.model_validate(values)


@pytest.fixture
def config() -> GroupConfig:
    return make_config()


@pytest.fixture
async def harness(config: GroupConfig) -> AsyncIterator[Harness]:
    clock = FakeClock()
    store = MemoryMetadataStore()
    coord = GroupCoordinator(store, config, clock)
    await coord.start()
    try:
        yield Harness(coord, clock, store)
    finally:
        await coord.close()
