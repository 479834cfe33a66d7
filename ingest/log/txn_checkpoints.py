"""Writing a partition's transaction checkpoints to the metadata store.

A checkpoint (:class:`~ingest.metadata.api.TxnCheckpoint`) only ever
describes durable data, so any checkpoint once written stays true: a newer one
only shortens the replay of a reopened partition. Writes therefore run in the
background, one in flight per partition and at most once per ``interval_s``
when markers keep coming, and are skipped when nothing changed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ingest.log.txn_state import TxnCheckpoint, TxnCheckpointStore

__all__ = ["TxnCheckpointWriter"]

log = logging.getLogger(__name__)


class TxnCheckpointWriter:
    """One partition's checkpoints: ``current`` computes the checkpoint of the
    partition's state now; ``store`` may be ``None`` (nothing is kept)."""

    def __init__(
        self,
        store: TxnCheckpointStore | None,
        stream_id: int,
        current: Callable[[], TxnCheckpoint],
        label: str,
    ) -> None:
        self.store = store
        self.stream_id = stream_id
        self._current = current
        self._label = label
        self.saved: TxnCheckpoint | None = None  # the last one this process read or wrote
        self.seen = False  # a transaction (or a checkpoint) was ever seen here
        self.interval_s = 1.0
        self._task: asyncio.Task[None] | None = None
        self._dirty = False

    async def load(self) -> TxnCheckpoint | None:
        """The stored checkpoint (a partition being opened)."""
        if self.store is None:
            return None
        checkpoint = await asyncio.to_thread(self.store.get_txn_checkpoint, self.stream_id)
        self.saved = checkpoint
        self.seen = self.seen or checkpoint is not None
        return checkpoint

    def save_soon(self) -> None:
        """Write the checkpoint in the background (changes made while a write
        is in flight are written right after it, at most once per interval)."""
        if self.store is None:
            return
        if self._task is not None and not self._task.done():
            self._dirty = True
            return
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            self._dirty = False
            started = time.monotonic()
            try:
                await self.save()
            except Exception:  # noqa: BLE001 - the next marker or pass writes again
                log.warning(
                    "writing the transaction checkpoint of %s failed", self._label, exc_info=True
                )
                return
            if not self._dirty:
                return
            wait = self.interval_s - (time.monotonic() - started)
            if wait > 0:
                await asyncio.sleep(wait)

    async def save(self, *, min_progress: int = 0) -> bool:
        """Write the checkpoint now if it changed (and its stable offset moved
        at least ``min_progress``, or the aborted list changed); True when
        written. With ``min_progress`` (the periodic pass), a partition that
        never saw a transaction writes nothing: its first transactional batch
        writes the first checkpoint, so a reopen's window scan suffices."""
        if self.store is None:
            return False
        last = self.saved
        if last is None and min_progress and not self.seen:
            return False
        checkpoint = self._current()
        if last is not None and (
            checkpoint == last
            or (
                checkpoint.aborted == last.aborted
                and checkpoint.stable_offset - last.stable_offset < min_progress
            )
        ):
            return False
        await asyncio.to_thread(self.store.put_txn_checkpoint, self.stream_id, checkpoint)
        self.saved = checkpoint
        return True

    async def settled(self) -> None:
        """Wait until the background writes started so far have finished."""
        await asyncio.sleep(0)  # callbacks of appends that just became durable
        while self._task is not None and not self._task.done():
            await self._task
