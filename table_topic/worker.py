"""One partition's reader: log -> converted Arrow chunks, in offset order.

Reads the partition log from the table's committed offset through
``PartitionLog.scan`` (the broker's own log cache; never a Kafka client), cuts
chunks of at most ``max_rows``/``max_bytes``, converts each in the thread pool
and queues it for the coordinator. The bounded queue is the back-pressure.
Only committed data is read: the worker never passes the last stable offset,
and aborted transactions' batches and transaction markers are skipped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from contextlib import aclosing, suppress

from ingest.log.partition import PartitionLog
from ingest.protocol.records import BatchHeader
from table_topic.convert.chunk import ConvertedChunk

__all__ = ["PartitionWorker", "Converter"]

log = logging.getLogger(__name__)

Converter = Callable[[int, list[tuple[bytes, BatchHeader]], int, int], Awaitable[ConvertedChunk]]


class PartitionWorker:
    def __init__(
        self,
        plog: PartitionLog,
        start: int,
        convert: Converter,
        queue: asyncio.Queue[ConvertedChunk],
        notify: asyncio.Event,
        max_rows: int,
        max_bytes: int,
    ) -> None:
        self.plog = plog
        self.partition = plog.partition
        self.position = start
        self._convert = convert
        self.queue = queue
        self._notify = notify
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.skipped = 0  # offsets lost to retention before they were converted

    async def _wait_for_data(self) -> None:
        fut = self.plog.wait_for_data()
        if self.plog.last_stable_offset > self.position:
            return
        with suppress(asyncio.TimeoutError):
            await asyncio.wait_for(fut, 1.0)

    async def _read_chunk(self) -> tuple[list[tuple[bytes, BatchHeader]], int]:
        batches: list[tuple[bytes, BatchHeader]] = []
        rows = nbytes = 0
        next_offset = self.position
        # the LSO only grows: the scan (which reads it again) reaches at least this far
        stable = self.plog.last_stable_offset
        full = False
        scan = self.plog.scan(self.position, committed_only=True)
        async with aclosing(scan) as batches_seen:  # type: ignore[type-var]
            async for view, h, _end in batches_seen:
                if h.last_offset < self.position:
                    continue
                data = bytes(view[h.position : h.position + h.size])
                batches.append((data, dataclasses.replace(h, position=0)))
                rows += h.count
                nbytes += h.size
                next_offset = h.last_offset + 1
                if rows >= self.max_rows or nbytes >= self.max_bytes:
                    full = True
                    break
        if not full:  # skipped markers and aborted batches up to the LSO are done with too
            next_offset = max(next_offset, stable)
        return batches, next_offset

    async def run(self) -> None:
        while True:
            if self.position < self.plog.log_start_offset:
                gap = self.plog.log_start_offset - self.position
                log.warning(
                    "%s-%d: %d offsets were deleted by retention before conversion",
                    self.plog.topic,
                    self.partition,
                    gap,
                )
                self.skipped += gap
                self.position = self.plog.log_start_offset
            if self.position >= self.plog.last_stable_offset:
                await self._wait_for_data()
                continue
            batches, next_offset = await self._read_chunk()
            if next_offset <= self.position:
                await self._wait_for_data()
                continue
            chunk = await self._convert(self.partition, batches, self.position, next_offset)
            await self.queue.put(chunk)
            self._notify.set()
            if chunk.fatal is not None:
                return  # errors.tolerance=none: stop here; the coordinator reports it
            self.position = chunk.next_offset
