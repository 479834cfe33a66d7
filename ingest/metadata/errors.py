"""Errors of the metadata store."""

from __future__ import annotations

from ingest.errors import StorageError

__all__ = ["MetadataError", "TopicExistsError", "UnknownTopicError", "UnknownStreamError"]


class MetadataError(StorageError):
    """Base of every metadata store error."""


class TopicExistsError(MetadataError):
    """A topic with that name already exists."""


class UnknownTopicError(MetadataError):
    """No topic with that name."""


class UnknownStreamError(MetadataError):
    """No stream with that id."""
