"""Schema formats keyed by Confluent's ``schemaType``: AVRO, JSON, PROTOBUF."""

from __future__ import annotations

from schema_registry.errors import InvalidSchema
from schema_registry.formats.avro import AvroFormat
from schema_registry.formats.base import ParsedSchema, ResolvedReference, SchemaFormat
from schema_registry.formats.jsonschema import JsonSchemaFormat
from schema_registry.formats.protobuf import ProtobufFormat

__all__ = ["FORMATS", "ParsedSchema", "ResolvedReference", "SchemaFormat", "get_format"]

FORMATS: dict[str, SchemaFormat] = {
    f.schema_type: f for f in (AvroFormat(), JsonSchemaFormat(), ProtobufFormat())
}


def get_format(schema_type: str | None) -> SchemaFormat:
    """The format for ``schemaType`` (absent means AVRO, as in Confluent's API)."""
    key = (schema_type or "AVRO").upper()
    try:
        return FORMATS[key]
    except KeyError:
        raise InvalidSchema(f"Invalid schema type {schema_type!r}") from None
