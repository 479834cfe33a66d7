"""Errors of the metadata store."""

from __future__ import annotations

from ingest.errors import StorageError

__all__ = [
    "MetadataError",
    "TopicExistsError",
    "UnknownTopicError",
    "UnknownStreamError",
    "WriterFencedError",
    "StreamNotOwnedError",
    "ensure_current_epoch",
    "ensure_owner",
]


class MetadataError(StorageError):
    """Base of every metadata store error."""


class TopicExistsError(MetadataError):
    """A topic with that name already exists."""


class UnknownTopicError(MetadataError):
    """No topic with that name."""


class UnknownStreamError(MetadataError):
    """No stream with that id."""


class WriterFencedError(MetadataError):
    """A change made on behalf of a writer whose epoch is no longer current:
    another process claimed the writer since (see ``claim_writer``). Nothing
    of the call was applied; the caller must stop writing."""


class StreamNotOwnedError(MetadataError):
    """A writer tried to add to (or trim) a stream another writer has claimed
    since (see ``claim_streams``): that writer lost the stream, and only this
    one stream; nothing of the call was applied. Deliberately not a
    ``WriterFencedError``: the writer may go on with its other streams."""

    def __init__(self, stream_id: int, owner: str | None) -> None:
        super().__init__(f"stream {stream_id} is owned by writer {owner!r}")
        self.stream_id = stream_id
        self.owner = owner


def ensure_owner(stream_id: int, owner: str | None, name: str) -> None:
    """Raise ``StreamNotOwnedError`` unless stream ``stream_id`` (owned by
    ``owner``) is open to writer ``name``: unclaimed or claimed by it."""
    if owner is not None and owner != name:
        raise StreamNotOwnedError(stream_id, owner)


def ensure_current_epoch(name: str, epoch: int, current: int) -> None:
    """Raise ``WriterFencedError`` unless ``epoch`` is writer ``name``'s ``current`` one."""
    if current != epoch:
        raise WriterFencedError(
            f"writer {name!r} epoch {epoch} is fenced (the current epoch is {current})"
        )
