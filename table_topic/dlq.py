"""Dead letters: records that cannot become rows go to a dead-letter topic, never dropped.

Each dead letter keeps the original key, value and headers, and adds headers
``tidelake.error``, ``tidelake.error.class``, ``tidelake.source.topic``,
``tidelake.source.partition``, ``tidelake.source.offset``. Dead letters are
written (and acknowledged durable) BEFORE the table commit that moves past
them; after a crash the same records are converted again, so the writer first
reads the dead-letter topic once and skips source offsets already there:
every bad record lands in the dead-letter topic exactly once.

In a cluster a broker can append only to the partitions it leads. The
dead-letter topic is created with one partition per source partition (so that
most brokers lead one) and a broker writes its dead letters to the lowest one it
leads. A broker that leads none keeps them pending: the commit that would move
past them fails (reported in the table's status as ``last_error``) and is retried
from the table's offsets until the broker leads a dead-letter partition; no
record is dropped. A new leader reads only the dead-letter partitions it leads,
so after a leader move a dead letter may be written a second time (at least once).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import aclosing

from ingest.log.manager import LogManager
from ingest.log.partition import PartitionLog
from ingest.protocol.errors import ErrorCode, KafkaError
from ingest.protocol.records import build_batch, decode_records
from table_topic.convert.chunk import DeadLetter
from table_topic.errors import TableTopicError

__all__ = [
    "DeadLetterWriter",
    "SOURCE_TOPIC",
    "SOURCE_PARTITION",
    "SOURCE_OFFSET",
    "ERROR",
    "ERROR_CLASS",
]

log = logging.getLogger(__name__)

ERROR = "tidelake.error"
ERROR_CLASS = "tidelake.error.class"
SOURCE_TOPIC = "tidelake.source.topic"
SOURCE_PARTITION = "tidelake.source.partition"
SOURCE_OFFSET = "tidelake.source.offset"
_MAX_BATCH_BYTES = 512 * 1024


class DeadLetterWriter:
    def __init__(self, logs: LogManager, topic: str, dlq_topic: str, partitions: int = 1) -> None:
        """``partitions``: of the dead-letter topic, if this writer creates it."""
        self.logs = logs
        self.topic = topic
        self.dlq_topic = dlq_topic
        self.partitions = max(1, partitions)
        self._written: dict[int, int] = {}  # source partition -> highest offset dead-lettered
        self.count = 0  # dead letters this writer appended

    async def load(self) -> None:
        """Read the dead-letter topic once to learn which source offsets it already holds."""
        t = self.logs.get(self.dlq_topic)
        if t is None:
            return
        for plog in t.partitions:
            async with aclosing(plog.scan(plog.log_start_offset)) as batches:  # type: ignore[type-var]
                async for view, h, _ in batches:
                    if h.is_control:
                        continue
                    for r in decode_records(view, h):
                        hdr = dict(r.headers)
                        if hdr.get(SOURCE_TOPIC) != self.topic.encode():
                            continue
                        try:
                            p = int(hdr[SOURCE_PARTITION] or b"-1")
                            o = int(hdr[SOURCE_OFFSET] or b"-1")
                        except (KeyError, ValueError):
                            continue
                        if o > self._written.get(p, -1):
                            self._written[p] = o

    async def _partition_log(self) -> PartitionLog:
        t = self.logs.get(self.dlq_topic)
        if t is None:
            try:
                await self.logs.create_topic(self.dlq_topic, self.partitions, 1, {})
            except KafkaError as exc:
                if exc.error_code != ErrorCode.topic_already_exists:
                    raise
            t = self.logs.get(self.dlq_topic)
        if t is None:
            raise TableTopicError(f"dead-letter topic {self.dlq_topic!r} is not available")
        if not t.logs:
            raise TableTopicError(
                f"dead-letter topic {self.dlq_topic!r}: this broker leads none of its "
                "partitions; the dead letters wait (the table does not move past them)"
            )
        return t.partitions[0]

    async def write(self, letters: Sequence[DeadLetter]) -> int:
        """Append the letters not written before; returns how many were appended (durably)."""
        fresh = [d for d in letters if d.offset > self._written.get(d.partition, -1)]
        if not fresh:
            return 0
        fresh.sort(key=lambda d: (d.partition, d.offset))
        plog = await self._partition_log()
        batch: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]] = []
        size = 0
        pending = []
        for d in fresh:
            headers = list(d.headers) + [
                (ERROR, d.error.encode("utf-8", "replace")[:4096]),
                (ERROR_CLASS, d.error_class.encode()),
                (SOURCE_TOPIC, self.topic.encode()),
                (SOURCE_PARTITION, str(d.partition).encode()),
                (SOURCE_OFFSET, str(d.offset).encode()),
            ]
            rec = (d.key, d.value, headers, max(d.timestamp, 0))
            rec_size = len(d.key or b"") + len(d.value or b"") + 200
            if batch and size + rec_size > _MAX_BATCH_BYTES:
                pending.append(batch)
                batch, size = [], 0
            batch.append(rec)
            size += rec_size
        if batch:
            pending.append(batch)
        for b in pending:
            outcome = plog.append(build_batch(b))
            if outcome.error != ErrorCode.none or outcome.durable is None:
                raise TableTopicError(
                    f"cannot write to dead-letter topic {self.dlq_topic!r}: {outcome.error.name} {outcome.message or ''}"
                )
            await outcome.durable
        for d in fresh:
            self._written[d.partition] = max(self._written.get(d.partition, -1), d.offset)
        self.count += len(fresh)
        return len(fresh)
