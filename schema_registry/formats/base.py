"""The small interface every schema format implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ParsedSchema", "ResolvedReference", "SchemaFormat"]


@dataclass(frozen=True, slots=True)
class ResolvedReference:
    """A referenced schema, fetched from the store: ``name`` is how the referrer names it.

    Avro: a fully qualified type name; JSON Schema: the ``$ref`` URL; Protobuf:
    the import path (``other.proto``).
    """

    name: str
    subject: str
    version: int
    schema_type: str
    schema: str


class ParsedSchema(ABC):
    """A schema that parsed and validated, with its dependencies resolved."""

    schema_type: str

    @abstractmethod
    def canonical(self) -> str:
        """The string stored and returned (compact, but as written)."""

    @abstractmethod
    def normalized(self) -> str:
        """The normalised string (``?normalize=true``): equal for equivalent schemas."""

    @abstractmethod
    def compatibility_errors(self, writer: ParsedSchema) -> list[str]:
        """Why data written with ``writer`` cannot be read with ``self`` (empty: it can)."""

    def formatted(self, fmt: str | None) -> str | None:
        """The schema rendered in an alternative ``format`` (None: not supported)."""
        return None


class SchemaFormat(ABC):
    """Parses one ``schemaType``; registered in :data:`schema_registry.formats.FORMATS`."""

    schema_type: str

    @abstractmethod
    def parse(self, text: str, references: Sequence[ResolvedReference]) -> ParsedSchema:
        """Parse ``text``; ``references`` come dependencies first. Raises ``InvalidSchema``."""
