"""Errors of the metadata store."""

from __future__ import annotations

from ingest.errors import StorageError

__all__ = [
    "MetadataError",
    "TopicExistsError",
    "UnknownTopicError",
    "UnknownStreamError",
    "WriterFencedError",
    "ensure_current_epoch",
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


def ensure_current_epoch(name: str, epoch: int, current: int) -> None:
    """Raise ``WriterFencedError`` unless ``epoch`` is writer ``name``'s ``current`` one."""
    if current != epoch:
        raise WriterFencedError(
            f"writer {name!r} epoch {epoch} is fenced (the current epoch is {current})"
        )
