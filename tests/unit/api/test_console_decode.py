"""How the console's message browser shows bytes: decoded through the
registry when they carry a schema id, text as text, anything else raw."""

from __future__ import annotations

import base64
import io
import json
import struct

import fastavro

from api.cluster_reads import decode_assignment
from api.console.decode import FieldDecoder
from schema_registry.requests import SchemaRequest
from schema_registry.service import RegistryService
from schema_registry.store.memory import MemorySchemaStore

SCHEMA = {"type": "record", "name": "Tea", "fields": [{"name": "kind", "type": "string"}]}


def _registry() -> tuple[RegistryService, int]:
    service = RegistryService(MemorySchemaStore())
    schema_id = service.register("tea-value", SchemaRequest(json.dumps(SCHEMA), "AVRO"))["id"]
    return service, int(schema_id)


def test_wire_format_avro_is_decoded_with_its_schema_and_subject() -> None:
    registry, schema_id = _registry()
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(SCHEMA), {"kind": "green"})
    shown = FieldDecoder(registry).decode(b"\x00" + struct.pack(">I", schema_id) + body.getvalue())
    assert shown.format == "avro" and shown.schema_id == schema_id
    assert shown.subject == "tea-value" and json.loads(shown.text or "") == {"kind": "green"}


def test_text_is_shown_as_text_json_as_json_and_other_bytes_as_base64() -> None:
    decoder = FieldDecoder(None)
    assert decoder.decode(b"order-17").model_dump(include={"format", "text"}) == {
        "format": "text",
        "text": "order-17",
    }
    assert decoder.decode(b'{"a": 1}').format == "json"
    raw = bytes([0xFF, 0x00, 0x01])
    shown = decoder.decode(raw)
    assert shown.format == "binary" and base64.b64decode(shown.text or "") == raw
    assert decoder.decode(None).format == "null"


def test_bytes_with_an_unknown_schema_id_are_not_decoded_as_wire_format() -> None:
    registry, _ = _registry()
    shown = FieldDecoder(registry).decode(b"\x00\x00\x00\x03\xe7abc")
    assert shown.format == "binary" and shown.schema_id is None


def test_a_consumer_assignment_is_read_as_topics_and_partitions() -> None:
    topic = b"orders"
    data = struct.pack(">hi", 0, 1) + struct.pack(">h", len(topic)) + topic
    data += struct.pack(">i3i", 3, 2, 0, 1) + struct.pack(">i", -1)
    assert decode_assignment(data) == (("orders", (0, 1, 2)),)
