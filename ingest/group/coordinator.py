"""The classic-protocol consumer group coordinator (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
DeleteGroups), without networking or wire encoding.

Guarantees:

* Group membership lives in memory only (like a Kafka coordinator that just
  loaded an empty ``__consumer_offsets``): after a restart clients rejoin.
* Committed offsets are durable: :meth:`GroupCoordinator.commit_offsets`
  returns ``NONE`` for a partition only after ``store.commit_offsets`` returned.
  Commits and offset deletion of one group are serialised (per-group lock), so
  the store sees them in the order they were acknowledged.
* Store calls are blocking and run in worker threads; nothing blocks the loop.
* JoinGroup and SyncGroup calls may wait (up to the rebalance timeout) for the
  other members; cancelling such a call does not take the member out of the
  rebalance, exactly as a dropped connection would not in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from ingest.group.group import Group
from ingest.group.migration import can_upgrade, to_classic, to_consumer
from ingest.group.timers import DeadlineTimer
from ingest.group.types import (
    FetchOffsetsResult,
    GroupConfig,
    GroupDescription,
    GroupState,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    ListedGroup,
    OffsetFetchPartition,
    SyncGroupResult,
)
from ingest.metadata.api import CommittedOffset

if TYPE_CHECKING:
    from ingest.group.consumer.coordinator import ConsumerGroupCoordinator
    from ingest.group.consumer.group import ConsumerGroup

__all__ = ["GroupCoordinator", "OffsetStore"]

_log = logging.getLogger(__name__)
_NONE = int(ErrorCode.none)
_T = TypeVar("_T")


class OffsetStore(Protocol):
    """The consumer-group part of :class:`ingest.metadata.api.MetadataStore`."""

    def commit_offsets(self, group: str, offsets: Sequence[CommittedOffset]) -> None: ...

    def fetch_offsets(
        self, group: str, topics: Iterable[str] | None = None
    ) -> list[CommittedOffset]: ...

    def delete_group_offsets(self, group: str) -> None: ...

    def list_offset_groups(self) -> list[str]: ...


class GroupCoordinator:
    """Coordinates every consumer group of this broker.

    ``clock`` (seconds, monotonic) drives session and rebalance deadlines; the
    timer task started by :meth:`start` (or lazily by the first request) applies
    them. ``wall_clock`` stamps committed offsets (``commit_ms``).
    """

    def __init__(
        self,
        store: OffsetStore,
        config: GroupConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
        *,
        wall_clock: Callable[[], float] = time.time,
        timer_max_sleep: float = 1.0,
    ) -> None:
        self._store = store
        self._config = config if config is not None else GroupConfig()
        self._clock = clock
        self._wall_clock = wall_clock
        self._groups: dict[str, Group] = {}
        self._timer = DeadlineTimer(clock, self._on_due, max_sleep=timer_max_sleep)
        # the partitions of a group with offsets committed in open
        # transactions (blocking: called in a worker thread)
        self.unstable: Callable[[str], set[tuple[str, int]]] = lambda _group: set()
        # a consumer group of the new protocol (KIP-848) with members has this id
        self.other_protocol: Callable[[str], bool] = lambda _group: False
        self._consumer: ConsumerGroupCoordinator | None = None
        self._closed = False

    def attach(self, consumer: ConsumerGroupCoordinator) -> None:
        """Work with the coordinator of the consumer group protocol (KIP-848):
        classic requests for its groups go there, and groups convert between
        the two as its ``migration_policy`` allows (online migration)."""
        self._consumer = consumer
        self.other_protocol = consumer.active
        consumer.classic_active = self.has_members
        consumer.upgrade = self._to_consumer
        consumer.downgrade = self._to_classic

    def _to_consumer(self, group_id: str) -> ConsumerGroup | None:
        group = self._groups.get(group_id)
        if group is None or self._consumer is None:
            return None
        if not can_upgrade(self._consumer.config.migration_policy, group):
            return None
        converted = to_consumer(group, self._consumer.config.session_timeout_ms, self._clock())
        # waiting JoinGroup/SyncGroup calls rejoin, into the consumer group
        group.fail_waiters(ErrorCode.rebalance_in_progress)
        group.mark_dead()
        del self._groups[group_id]
        return converted

    def _to_classic(self, consumer_group: ConsumerGroup) -> None:
        group = to_classic(consumer_group, self._config, self._clock())
        self._groups[group.group_id] = group
        if self._active():
            self._after(group)

    def _consumer_group(self, group_id: str) -> ConsumerGroupCoordinator | None:
        """The consumer-protocol coordinator if it has this group (and we do not)."""
        if group_id in self._groups or self._consumer is None:
            return None
        return self._consumer if group_id in self._consumer.groups else None

    # --- lifecycle ------------------------------------------------------------------
    async def start(self) -> None:
        """Start the timer task (idempotent)."""
        self._closed = False
        self._timer.start()

    async def close(self) -> None:
        """Stop the timers; pending JoinGroup/SyncGroup calls get NOT_COORDINATOR."""
        self._closed = True
        await self._timer.stop()
        for group in self._groups.values():
            group.fail_waiters(ErrorCode.not_coordinator)
        self._groups.clear()

    def run_due_timers(self) -> None:
        """Apply every deadline that has passed now (tests with a fake clock)."""
        self._timer.run_due()

    def _active(self) -> bool:
        if self._closed:
            return False
        self._timer.start()
        return True

    def _on_due(self, group: Group, now: float) -> None:
        if self._groups.get(group.group_id) is not group:
            return
        group.tick(now)
        if group.should_forget(now):
            del self._groups[group.group_id]
            return
        self._after(group)

    def _after(self, group: Group) -> None:
        group.note_idle(self._clock())
        self._timer.schedule(group)

    def _session_timeout_ok(self, session_timeout_ms: int) -> bool:
        c = self._config
        return (
            c.group_min_session_timeout_ms <= session_timeout_ms <= (c.group_max_session_timeout_ms)
        )

    async def _io(self, fn: Callable[..., _T], *args: object) -> _T:
        return await asyncio.to_thread(fn, *args)

    async def _stored_groups(self) -> set[str] | None:
        """Groups with committed offsets, or None if the store failed."""
        try:
            return set(await self._io(self._store.list_offset_groups))
        except Exception:
            _log.exception("listing offset groups failed")
            return None

    # --- membership -------------------------------------------------------------------
    async def join_group(
        self,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        client_id: str,
        client_host: str,
        require_known_member_id: bool,
    ) -> JoinGroupResult:
        """JoinGroup. May wait until the rebalance completes.

        ``rebalance_timeout_ms`` should be ``session_timeout_ms`` for JoinGroup v0.
        ``require_known_member_id`` is true for JoinGroup v4+.
        """
        if not self._active():
            return JoinGroupResult.failed(ErrorCode.coordinator_not_available, member_id)
        if not group_id:
            return JoinGroupResult.failed(ErrorCode.invalid_group_id, member_id)
        if not self._session_timeout_ok(session_timeout_ms):
            return JoinGroupResult.failed(ErrorCode.invalid_session_timeout, member_id)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        if (consumer := self._consumer_group(group_id)) is not None:
            # a consumer group: a classic member joins it (online migration)
            joined = consumer.join_classic(
                group_id,
                member_id=member_id,
                instance_id=group_instance_id,
                protocol_type=protocol_type,
                protocols=list(protocols),
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                client_id=client_id,
                client_host=client_host,
                require_known_member_id=require_known_member_id,
            )
            if joined is not None:
                return joined
        elif self._consumer is None and self.other_protocol(group_id):
            return JoinGroupResult.failed(ErrorCode.inconsistent_group_protocol, member_id)
        group = self._groups.get(group_id)
        if group is None:
            if member_id:
                return JoinGroupResult.failed(ErrorCode.unknown_member_id, member_id)
            group = self._groups[group_id] = Group(group_id, self._config)
        outcome = group.join(
            member_id=member_id,
            group_instance_id=group_instance_id,
            protocol_type=protocol_type,
            protocols=list(protocols),
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            client_id=client_id,
            client_host=client_host,
            require_known_member_id=require_known_member_id,
            now=self._clock(),
        )
        self._after(group)
        if isinstance(outcome, JoinGroupResult):
            return outcome
        return await asyncio.shield(outcome)

    async def sync_group(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncGroupResult:
        """SyncGroup. Followers wait for the leader's assignment."""
        if not self._active():
            return SyncGroupResult.failed(ErrorCode.coordinator_not_available)
        if not group_id:
            return SyncGroupResult.failed(ErrorCode.invalid_group_id)
        if (consumer := self._consumer_group(group_id)) is not None:
            synced = consumer.sync_classic(
                group_id,
                generation_id=generation_id,
                member_id=member_id,
                instance_id=group_instance_id,
                protocol_type=protocol_type,
                protocol_name=protocol_name,
            )
            if synced is not None:
                return synced
        group = self._groups.get(group_id)
        if group is None:
            return SyncGroupResult.failed(ErrorCode.unknown_member_id)
        outcome = group.sync(
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=assignments,
            now=self._clock(),
        )
        self._after(group)
        if isinstance(outcome, SyncGroupResult):
            return outcome
        return await asyncio.shield(outcome)

    async def heartbeat(
        self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> int:
        if not self._active():
            return int(ErrorCode.coordinator_not_available)
        if not group_id:
            return int(ErrorCode.invalid_group_id)
        if (consumer := self._consumer_group(group_id)) is not None:
            beat = consumer.heartbeat_classic(
                group_id,
                generation_id=generation_id,
                member_id=member_id,
                instance_id=group_instance_id,
            )
            if beat is not None:
                return beat
        group = self._groups.get(group_id)
        if group is None:
            return int(ErrorCode.unknown_member_id)
        code = group.heartbeat(
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            now=self._clock(),
        )
        self._after(group)
        return code

    async def leave_group(
        self, *, group_id: str, members: list[tuple[str, str | None]]
    ) -> LeaveGroupResult:
        """LeaveGroup for ``(member_id, group_instance_id)`` pairs.

        A static member may leave by instance id with an empty member id.
        """
        if not self._active():
            return LeaveGroupResult(int(ErrorCode.coordinator_not_available))
        if not group_id:
            return LeaveGroupResult(int(ErrorCode.invalid_group_id))
        if (consumer := self._consumer_group(group_id)) is not None:
            left = consumer.leave_classic(group_id, members)
            if left is not None:
                return LeaveGroupResult(_NONE, left)
        group = self._groups.get(group_id)
        if group is None:
            return LeaveGroupResult(
                _NONE,
                [LeaveMemberResult(m, i, int(ErrorCode.unknown_member_id)) for m, i in members],
            )
        if group.state is GroupState.DEAD:
            return LeaveGroupResult(int(ErrorCode.coordinator_not_available))
        results = group.leave(members, self._clock())
        self._after(group)
        return LeaveGroupResult(_NONE, results)

    # --- offsets ----------------------------------------------------------------------
    async def commit_offsets(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: list[tuple[str, int, int, int, str | None]],
    ) -> dict[tuple[str, int], int]:
        """OffsetCommit of ``(topic, partition, offset, leader_epoch, metadata)``.

        A partition's ``NONE`` means the offset is in the store. The caller
        (which knows the topics) answers UNKNOWN_TOPIC_OR_PARTITION itself and
        passes only existing partitions. Use generation -1 and member id "" for
        a commit outside group management (only allowed while the group is Empty).
        """

        def every(code: ErrorCode | int) -> dict[tuple[str, int], int]:
            return {(t, p): int(code) for t, p, *_ in offsets}

        if not self._active():
            return every(ErrorCode.coordinator_not_available)
        if not group_id:
            return every(ErrorCode.invalid_group_id)
        group = self._groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # A commit from a generation of a group we do not know.
                return every(ErrorCode.illegal_generation)
            group = self._groups[group_id] = Group(group_id, self._config)
        async with group.lock:
            if self._groups.get(group_id) is not group:  # deleted while we waited
                return every(ErrorCode.coordinator_not_available)
            code = group.validate_commit(generation_id, member_id, group_instance_id, self._clock())
            self._after(group)
            if code != _NONE:
                return every(code)
            results: dict[tuple[str, int], int] = {}
            to_store: list[CommittedOffset] = []
            commit_ms = int(self._wall_clock() * 1000)
            limit = self._config.max_metadata_bytes
            for topic, partition, offset, leader_epoch, metadata in offsets:
                if metadata is not None and len(metadata) > limit:
                    results[(topic, partition)] = int(ErrorCode.offset_metadata_too_large)
                    continue
                results[(topic, partition)] = _NONE
                to_store.append(
                    CommittedOffset(topic, partition, offset, leader_epoch, metadata, commit_ms)
                )
            if to_store:
                try:
                    await self._io(self._store.commit_offsets, group_id, to_store)
                except Exception:
                    _log.exception("storing offsets of group %r failed", group_id)
                    for o in to_store:
                        results[(o.topic, o.partition)] = int(ErrorCode.coordinator_not_available)
        self._after(group)
        return results

    async def store_offsets(
        self, group_id: str, offsets: list[tuple[str, int, int, int, str | None]]
    ) -> dict[tuple[str, int], int]:
        """Store offsets whose committer was checked elsewhere (a member of
        a consumer group of the new protocol): OffsetCommit's answers."""
        if not self._active():
            return {(t, p): int(ErrorCode.coordinator_not_available) for t, p, *_ in offsets}
        results: dict[tuple[str, int], int] = {}
        to_store: list[CommittedOffset] = []
        commit_ms = int(self._wall_clock() * 1000)
        limit = self._config.max_metadata_bytes
        for topic, partition, offset, leader_epoch, metadata in offsets:
            if metadata is not None and len(metadata) > limit:
                results[(topic, partition)] = int(ErrorCode.offset_metadata_too_large)
                continue
            results[(topic, partition)] = _NONE
            to_store.append(
                CommittedOffset(topic, partition, offset, leader_epoch, metadata, commit_ms)
            )
        if to_store:
            try:
                await self._io(self._store.commit_offsets, group_id, to_store)
            except Exception:
                _log.exception("storing offsets of group %r failed", group_id)
                for o in to_store:
                    results[(o.topic, o.partition)] = int(ErrorCode.coordinator_not_available)
        return results

    def has_members(self, group_id: str) -> bool:
        """A classic group with members (or joining ones) has this id."""
        group = self._groups.get(group_id)
        return group is not None and group.state not in (GroupState.EMPTY, GroupState.DEAD)

    # --- transactional offsets ---------------------------------------------------------
    @property
    def max_metadata_bytes(self) -> int:
        return self._config.max_metadata_bytes

    async def validate_generation(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> int:
        """TxnOffsetCommit's check of the committer (KIP-447): none when it
        names no generation or member, else OffsetCommit's."""
        if not self._active():
            return int(ErrorCode.coordinator_not_available)
        if generation_id < 0 and not member_id and group_instance_id is None:
            return _NONE
        if (consumer := self._consumer_group(group_id)) is not None:
            checked = consumer.validate_offsets(group_id, member_id, generation_id, api_version=9)
            if checked is not None:
                return int(checked)
        group = self._groups.get(group_id)
        if group is None:
            return int(ErrorCode.illegal_generation)
        async with group.lock:
            code = group.validate_commit(generation_id, member_id, group_instance_id, self._clock())
        self._after(group)
        return code

    async def commit_transactional_offsets(
        self, group_id: str, offsets: Sequence[CommittedOffset]
    ) -> None:
        """Store offsets of a committed transaction (validated when they were
        sent); raises when the store fails, so that the commit is retried."""
        commit_ms = int(self._wall_clock() * 1000)
        stamped = [replace(o, commit_ms=commit_ms) for o in offsets]
        if stamped:
            await self._io(self._store.commit_offsets, group_id, stamped)

    async def fetch_offsets(
        self,
        *,
        group_id: str,
        partitions: list[tuple[str, int]] | None,
        require_stable: bool = False,
    ) -> FetchOffsetsResult:
        """OffsetFetch. ``partitions=None`` returns every committed offset.

        An unknown group or partition gives offset -1, leader epoch -1, metadata
        "" and no error, as Kafka does. With ``require_stable``, a partition
        with an offset committed in a still open transaction (``unstable``)
        gets UNSTABLE_OFFSET_COMMIT (the client asks again).
        """
        if not self._active():
            return FetchOffsetsResult(int(ErrorCode.coordinator_not_available))
        if not group_id:
            return FetchOffsetsResult(int(ErrorCode.invalid_group_id))
        topics = None if partitions is None else sorted({t for t, _ in partitions})
        try:
            committed = await self._io(self._store.fetch_offsets, group_id, topics)
        except Exception:
            _log.exception("reading offsets of group %r failed", group_id)
            return FetchOffsetsResult(int(ErrorCode.coordinator_not_available))
        if partitions is None:
            return FetchOffsetsResult(
                _NONE,
                [
                    OffsetFetchPartition(
                        o.topic, o.partition, o.offset, o.leader_epoch, o.metadata, _NONE
                    )
                    for o in committed
                ],
            )
        by_key = {(o.topic, o.partition): o for o in committed}
        unstable = await self._io(self.unstable, group_id) if require_stable else set()
        out: list[OffsetFetchPartition] = []
        for topic, partition in partitions:
            o = by_key.get((topic, partition))
            if (topic, partition) in unstable:
                out.append(
                    OffsetFetchPartition(
                        topic, partition, -1, -1, "", int(ErrorCode.unstable_offset_commit)
                    )
                )
            elif o is None:
                out.append(OffsetFetchPartition(topic, partition, -1, -1, "", _NONE))
            else:
                out.append(
                    OffsetFetchPartition(
                        topic, partition, o.offset, o.leader_epoch, o.metadata, _NONE
                    )
                )
        return FetchOffsetsResult(_NONE, out)

    # --- administration ---------------------------------------------------------------
    async def describe_groups(self, group_ids: list[str]) -> list[GroupDescription]:
        """DescribeGroups. An unknown group is described as Dead with no error."""
        if not self._active():
            return [
                GroupDescription(int(ErrorCode.coordinator_not_available), g, "Dead", "", "")
                for g in group_ids
            ]
        stored: set[str] | None = None
        looked_up = False
        out: list[GroupDescription] = []
        for group_id in group_ids:
            if not group_id:
                out.append(
                    GroupDescription(int(ErrorCode.invalid_group_id), group_id, "Dead", "", "")
                )
                continue
            if self._consumer_group(group_id) is not None:
                # a consumer group (KIP-848): ConsumerGroupDescribe describes
                # it; DescribeGroups up to v5 answers as for no classic group
                out.append(GroupDescription(_NONE, group_id, "Dead", "", ""))
                continue
            group = self._groups.get(group_id)
            if group is not None:
                stable = group.state is GroupState.STABLE
                out.append(
                    GroupDescription(
                        _NONE,
                        group_id,
                        str(group.state),
                        group.protocol_type or "",
                        (group.protocol_name or "") if stable else "",
                        group.describe_members(),
                    )
                )
                continue
            if not looked_up:
                stored, looked_up = await self._stored_groups(), True
            if stored is None:
                error = int(ErrorCode.coordinator_not_available)
                out.append(GroupDescription(error, group_id, "Dead", "", ""))
                continue
            state = "Empty" if group_id in stored else "Dead"
            out.append(GroupDescription(_NONE, group_id, state, "", ""))
        return out

    async def list_groups(self, states_filter: list[str] | None = None) -> list[ListedGroup]:
        """ListGroups: groups in memory plus groups that only have offsets (Empty).

        ``states_filter`` matches state names case-insensitively; empty or None
        means all states. Errors of the store propagate.
        """
        if not self._active():
            return []
        wanted = {s.lower() for s in states_filter} if states_filter else None
        listed: dict[str, ListedGroup] = {}
        for group in self._groups.values():
            if group.state is GroupState.DEAD:
                continue
            listed[group.group_id] = ListedGroup(
                group.group_id, group.protocol_type or "", str(group.state)
            )
        for group_id in await self._io(self._store.list_offset_groups):
            if group_id not in listed and group_id not in self._groups:
                listed[group_id] = ListedGroup(group_id, "", str(GroupState.EMPTY))
        return [g for _, g in sorted(listed.items()) if wanted is None or g.state.lower() in wanted]

    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        """DeleteGroups: only groups without members; deletes their offsets.

        NON_EMPTY_GROUP if the group has members, GROUP_ID_NOT_FOUND if it has
        neither members nor committed offsets.
        """
        if not self._active():
            return {g: int(ErrorCode.coordinator_not_available) for g in group_ids}
        results: dict[str, int] = {}
        stored: set[str] | None = None
        looked_up = False
        for group_id in group_ids:
            if not group_id:
                results[group_id] = int(ErrorCode.invalid_group_id)
                continue
            group = self._groups.get(group_id)
            if group is None:
                if not looked_up:
                    stored, looked_up = await self._stored_groups(), True
                if stored is None:
                    results[group_id] = int(ErrorCode.coordinator_not_available)
                    continue
                if group_id not in stored:
                    results[group_id] = int(ErrorCode.group_id_not_found)
                    continue
                group = self._groups.setdefault(group_id, Group(group_id, self._config))
            results[group_id] = await self._delete_group(group)
        return results

    async def _delete_group(self, group: Group) -> int:
        async with group.lock:
            if self._groups.get(group.group_id) is not group or group.state is GroupState.DEAD:
                return int(ErrorCode.group_id_not_found)
            if group.state is not GroupState.EMPTY or group.has_members():
                return int(ErrorCode.non_empty_group)
            group.mark_dead()
            try:
                await self._io(self._store.delete_group_offsets, group.group_id)
            except Exception:
                _log.exception("deleting offsets of group %r failed", group.group_id)
                group.state = GroupState.EMPTY
                return int(ErrorCode.coordinator_not_available)
            finally:
                if group.state is GroupState.DEAD:
                    del self._groups[group.group_id]
            return _NONE
