"""Errors of the table topic room: one base, :class:`TableTopicError`."""

from __future__ import annotations

from pyiceberg.exceptions import ValidationException

from ingest.errors import TidelakeError

__all__ = [
    "ConcurrentWriterError",
    "TableTopicError",
    "InvalidDataError",
    "SchemaEvolutionError",
    "TableTopicConfigError",
]


class TableTopicError(TidelakeError):
    """Base of every error the table topic room raises on purpose."""


class TableTopicConfigError(TableTopicError):
    """A table.topic.* config value that cannot be used (names the key)."""


class InvalidDataError(TableTopicError):
    """One record cannot be converted (bad payload, unknown schema id, type mismatch).

    Goes down the ``table.topic.errors.tolerance`` path: dead-lettered under
    ``invalid_data`` and ``all``, stops the topic's table under ``none``.
    """


class SchemaEvolutionError(TableTopicError):
    """A record's schema cannot be merged into the table's schema (incompatible change).

    Treated as invalid data: dead-lettered under ``invalid_data`` and ``all``,
    stops the table under ``none``; never written into the table.
    """


class ConcurrentWriterError(TableTopicError, ValidationException):
    """Another writer committed offsets of this topic since this commit was planned.

    Never retried in place (that would commit the same records twice): the
    coordinator starts again from the offsets now in the table.
    """
