"""Show a record's key, value and headers as a person reads them: decoded
through the schema registry when the bytes carry a schema id (Confluent wire
format: magic byte 0 and a 4-byte id), as text when they are text, raw
(base64) otherwise."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import fastavro

from api.console.models import DecodedField

__all__ = ["FieldDecoder"]

_MAGIC = 0
_CACHED_SCHEMAS = 1000


def _as_text(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if any(ord(c) < 32 and c not in "\t\n\r" for c in text):
        return None
    return text


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return str(value)


class FieldDecoder:
    """Decodes with a :class:`schema_registry.service.RegistryService` (or none)."""

    def __init__(self, registry: Any | None) -> None:
        self._registry = registry
        self._schemas: dict[int, tuple[str, Any, str | None]] = {}

    def decode(self, data: bytes | None) -> DecodedField:
        if data is None:
            return DecodedField(format="null")
        if len(data) > 5 and data[0] == _MAGIC and self._registry is not None:
            schema_id = int.from_bytes(data[1:5], "big")
            found = self._with_schema(schema_id, data[5:])
            if found is not None:
                return found
        text = _as_text(data)
        if text is not None:
            try:
                json.loads(text)
            except ValueError:
                return DecodedField(format="text", text=text)
            return DecodedField(format="json", text=text)
        return DecodedField(format="binary", text=base64.b64encode(data).decode())

    def _schema(self, schema_id: int) -> tuple[str, Any, str | None] | None:
        """(type, parsed schema, a subject) of an id, looked up once (ids never
        change meaning); None when the registry has no such id (yet)."""
        if schema_id in self._schemas:
            return self._schemas[schema_id]
        assert self._registry is not None
        found: tuple[str, Any, str | None] | None
        try:
            schema = self._registry.get_schema(schema_id)
            parsed = self._registry.parsed_schema(schema_id)
            kind = str(schema.get("schemaType", "AVRO")).upper()
            found = (kind, parsed, self._subject_of(schema_id))
        except Exception:  # noqa: BLE001 - no such id: these bytes are not wire format
            found = None
        if found is not None:  # an unknown id may be registered later
            if len(self._schemas) >= _CACHED_SCHEMAS:
                self._schemas.clear()
            self._schemas[schema_id] = found
        return found

    def _with_schema(self, schema_id: int, body: bytes) -> DecodedField | None:
        known = self._schema(schema_id)
        if known is None:
            return None
        kind, parsed, subject = known
        try:
            if kind == "AVRO":
                value = fastavro.schemaless_reader(io.BytesIO(body), parsed.parsed, None)
                text = json.dumps(value, default=_json_default, ensure_ascii=False)
                return DecodedField(format="avro", text=text, schema_id=schema_id, subject=subject)
            if kind == "JSON":
                return DecodedField(
                    format="json-schema",
                    text=body.decode("utf-8"),
                    schema_id=schema_id,
                    subject=subject,
                )
        except Exception as exc:  # noqa: BLE001 - show the raw bytes and why
            return DecodedField(
                format="binary",
                text=base64.b64encode(body).decode(),
                schema_id=schema_id,
                subject=subject,
                error=f"cannot decode with schema {schema_id}: {exc}",
            )
        # Protobuf: message indexes follow the id; shown raw with its schema
        return DecodedField(
            format="protobuf",
            text=base64.b64encode(body).decode(),
            schema_id=schema_id,
            subject=subject,
        )

    def _subject_of(self, schema_id: int) -> str | None:
        assert self._registry is not None
        try:
            versions = self._registry.schema_versions(schema_id)
        except Exception:  # noqa: BLE001
            return None
        return str(versions[0].subject) if versions else None
