"""Conversion in worker processes: Python-heavy record parsing runs on every core.

Threads share one GIL, so per-record work (Kafka record parsing, payload
framing, fastavro) does not scale with threads. With
``TIDELAKE_TABLE_TOPIC_CONVERT_PROCESSES`` > 0, chunks are converted in a
process pool instead. Worker processes have no registry connection: the parent
passes a snapshot of the registry answers seen so far; a lookup the snapshot
cannot answer raises :class:`SchemaLookupNeeded`, the parent asks the real
registry (in a thread) and retries the chunk with the answer added.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any

from ingest.protocol.records import BatchHeader
from table_topic.config import TableTopicConfig
from table_topic.convert.chunk import ConvertedChunk, convert_batches
from table_topic.decode.resolver import LookupPending, RegistryLike, SchemaResolver

__all__ = ["ProcessConverter", "SchemaLookupNeeded"]

LookupKey = tuple[Any, ...]
_NOT_FOUND = "__not_found__"
_LATEST_TTL_S = 5.0


class SchemaLookupNeeded(LookupPending):
    def __init__(self, key: LookupKey) -> None:
        super().__init__(repr(key))
        self.key = key


class SchemaNotFound(Exception):
    """Named like the registry's error, so the resolver treats it as invalid data."""


class _SnapshotRegistry:
    def __init__(self, answers: dict[LookupKey, Any]) -> None:
        self.answers = answers

    def _answer(self, key: LookupKey) -> dict[str, Any]:
        if key not in self.answers:
            raise SchemaLookupNeeded(key)
        value = self.answers[key]
        if value == _NOT_FOUND:
            raise SchemaNotFound(repr(key))
        return value  # type: ignore[no-any-return]

    def get_schema(self, schema_id: int, fmt: str | None = None) -> dict[str, Any]:
        return self._answer(("schema", schema_id, fmt))

    def get_version(
        self, subject: str, version: str | int, deleted: bool = False, fmt: str | None = None
    ) -> dict[str, Any]:
        return self._answer(("version", subject, str(version), fmt))


# one resolver per worker process, rebuilt when the parent's answers grow
_STATE: dict[str, Any] = {}


def _convert_in_process(
    answers: dict[LookupKey, Any],
    generation: int,
    partition: int,
    batches: Sequence[tuple[bytes, BatchHeader]],
    start: int,
    next_offset: int,
    cfg: TableTopicConfig,
) -> ConvertedChunk:
    if _STATE.get("generation") != generation:
        _STATE["registry"] = _SnapshotRegistry(answers)
        _STATE["resolver"] = SchemaResolver(_STATE["registry"], latest_ttl_s=0.0)
        _STATE["generation"] = generation
    return convert_batches(partition, batches, start, next_offset, cfg, _STATE["resolver"])


class ProcessConverter:
    """``convert(partition, batches, start, next_offset, cfg)`` in a process pool."""

    def __init__(self, processes: int, registry: RegistryLike | None, lookups: Executor) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._pool = ProcessPoolExecutor(processes, mp_context=ctx)
        self._registry = registry
        self._lookups = lookups
        self._answers: dict[LookupKey, Any] = {}
        self._latest_at: dict[LookupKey, float] = {}
        self._generation = 0
        self._lock = threading.Lock()

    def _lookup(self, key: LookupKey) -> None:
        if self._registry is None:
            value: Any = _NOT_FOUND
        else:
            try:
                if key[0] == "schema":
                    value = self._registry.get_schema(key[1], key[2])
                else:
                    version: str | int = key[2]
                    if isinstance(version, str) and version.isdigit():
                        version = int(version)
                    value = self._registry.get_version(key[1], version, fmt=key[3])
            except Exception as exc:
                if type(exc).__name__ not in (
                    "SchemaNotFound",
                    "SubjectNotFound",
                    "VersionNotFound",
                ):
                    raise
                value = _NOT_FOUND
        with self._lock:
            self._answers = {**self._answers, key: value}
            if key[0] == "version" and key[2] == "latest":
                self._latest_at[key] = time.monotonic()
            self._generation += 1

    def _expire_latest(self) -> None:
        now = time.monotonic()
        stale = [k for k, t in self._latest_at.items() if now - t > _LATEST_TTL_S]
        if stale:
            with self._lock:
                self._answers = {k: v for k, v in self._answers.items() if k not in stale}
                for k in stale:
                    del self._latest_at[k]
                self._generation += 1

    async def convert(
        self,
        partition: int,
        batches: list[tuple[bytes, BatchHeader]],
        start: int,
        next_offset: int,
        cfg: TableTopicConfig,
    ) -> ConvertedChunk:
        loop = asyncio.get_running_loop()
        self._expire_latest()
        for _attempt in range(64):
            answers, generation = self._answers, self._generation
            try:
                return await loop.run_in_executor(
                    self._pool,
                    _convert_in_process,
                    answers,
                    generation,
                    partition,
                    batches,
                    start,
                    next_offset,
                    cfg,
                )
            except SchemaLookupNeeded as need:
                await loop.run_in_executor(self._lookups, self._lookup, need.key)
        raise RuntimeError("schema lookups did not converge")

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
