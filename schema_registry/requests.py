"""Request bodies and path values of the registry API, validated into Confluent errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from schema_registry.errors import (
    InvalidSchema,
    InvalidSubject,
    InvalidVersion,
    SchemaNotFound,
    UnprocessableEntity,
)
from schema_registry.formats import FORMATS
from schema_registry.store import Reference

__all__ = [
    "LATEST",
    "MAX_INT32",
    "SchemaRequest",
    "check_config_fields",
    "check_schema_id",
    "check_subject",
    "parse_version",
]

LATEST = -1
MAX_INT32 = 2**31 - 1  # ids and versions are Java ints in Confluent, INTEGER in PostgreSQL
_MAX_VERSION = MAX_INT32


@dataclass(frozen=True, slots=True)
class SchemaRequest:
    """The body of register / lookup / compatibility requests."""

    schema: str
    schema_type: str
    references: tuple[Reference, ...] = ()
    id: int | None = None
    version: int | None = None
    extras: str = ""  # compact JSON of metadata / ruleSet, "" when neither was given

    @classmethod
    def from_json(cls, body: Any) -> SchemaRequest:
        if not isinstance(body, dict):
            raise InvalidSchema("Invalid schema: request body must be a JSON object")
        schema = body.get("schema")
        if not isinstance(schema, str) or not schema.strip():
            raise InvalidSchema(
                "Empty schema" if not schema else "Invalid schema: 'schema' must be a string"
            )
        schema_type = body.get("schemaType") or "AVRO"
        if not isinstance(schema_type, str) or schema_type.upper() not in FORMATS:
            raise InvalidSchema(f"Invalid schema type {schema_type!r}")
        refs: list[Reference] = []
        raw_refs = body.get("references") or []
        if not isinstance(raw_refs, list):
            raise InvalidSchema("Invalid schema: 'references' must be a list")
        for ref in raw_refs:
            if not isinstance(ref, dict):
                raise InvalidSchema("Invalid schema: a reference must be an object")
            name, subject, version = ref.get("name"), ref.get("subject"), ref.get("version")
            if not isinstance(name, str) or not isinstance(subject, str) or not name or not subject:
                raise InvalidSchema("Invalid schema: a reference needs a name and a subject")
            if version is None:
                version = LATEST
            if not isinstance(version, int) or isinstance(version, bool):
                raise InvalidSchema("Invalid schema: a reference version must be an integer")
            if not -MAX_INT32 <= version <= MAX_INT32:
                raise InvalidSchema(f"Invalid schema: reference version {version} is out of range")
            refs.append(Reference(name, subject, version))
        ids = [body.get("id"), body.get("version")]
        for value in ids:
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise InvalidSchema("Invalid schema: 'id' and 'version' must be integers")
            if value is not None and value > MAX_INT32:
                raise InvalidSchema(
                    f"Invalid schema: 'id' and 'version' must be at most {MAX_INT32}"
                )
        id_, version_ = (v if v is not None and v > 0 else None for v in ids)
        contract: dict[str, Any] = {}
        for key in ("metadata", "ruleSet"):
            value = body.get(key)
            if value is None:
                continue
            if not isinstance(value, dict):
                raise InvalidSchema(f"Invalid schema: '{key}' must be an object")
            if value:
                contract[key] = value
        extras = json.dumps(contract, sort_keys=True, separators=(",", ":")) if contract else ""
        return cls(schema, schema_type.upper(), tuple(refs), id_, version_, extras)


def parse_version(value: str | int) -> int:
    """``latest`` / ``-1`` -> -1; else an int in [1, 2^31-1]; otherwise error 42202."""
    text = str(value).strip()
    if text.lower() == "latest" or text == "-1":
        return LATEST
    try:
        number = int(text)
    except ValueError:
        number = 0
    if not 1 <= number <= _MAX_VERSION:
        raise InvalidVersion(
            f"The specified version '{value}' is not a valid version id. Allowed values are "
            f'between [1, 2^31-1] and the string "latest"'
        )
    return number


# Config fields Confluent knows, by JSON type; null means "not set". Others are kept as given.
_CONFIG_FIELDS: dict[str, type] = {
    "normalize": bool,
    "validateFields": bool,
    "validateRules": bool,
    "alias": str,
    "compatibilityGroup": str,
    "compatibilityPolicy": str,
    "defaultMetadata": dict,
    "overrideMetadata": dict,
    "defaultRuleSet": dict,
    "overrideRuleSet": dict,
}


def check_config_fields(body: dict[str, Any]) -> None:
    """A config field of the wrong JSON type is refused (422) before anything is stored."""
    for key, kind in _CONFIG_FIELDS.items():
        value = body.get(key)
        if value is not None and not isinstance(value, kind):
            raise UnprocessableEntity(
                f"Cannot deserialize value of config field '{key}': expected {kind.__name__}"
            )


def check_schema_id(schema_id: int) -> int:
    """An id no schema can have (beyond 32 bits, negative) is simply not found (40403)."""
    if not 0 <= schema_id <= MAX_INT32:
        raise SchemaNotFound(f"Schema {schema_id} not found")
    return schema_id


def check_subject(subject: str) -> None:
    if not subject or any(ord(c) < 32 for c in subject):
        raise InvalidSubject(f"Invalid subject {subject!r}")
