"""Find the decoder for a schema id, or for a subject's latest version, in the registry.

Ids never change meaning, so decoders by id are cached for the life of the
process; a subject's latest version is looked up again after ``latest_ttl_s``.
"""

from __future__ import annotations

import base64
import threading
import time
from typing import Any, Protocol

from google.protobuf import descriptor_pb2, descriptor_pool

from table_topic.decode.avro import AvroDecoder
from table_topic.decode.base import PayloadDecoder
from table_topic.decode.jsonschema import JsonSchemaDecoder
from table_topic.decode.protobuf import ProtobufDecoder
from table_topic.errors import InvalidDataError, TableTopicError

__all__ = ["LookupPending", "RegistryLike", "SchemaResolver"]


class LookupPending(Exception):  # noqa: N818 - a signal, not a failure
    """Raised by a resolver that must have a schema fetched elsewhere first (a worker
    process asks its parent). Neither invalid data nor a failure: never tolerated."""


class RegistryLike(Protocol):
    """The part of ``schema_registry.service.RegistryService`` the resolver uses."""

    def get_schema(self, schema_id: int, fmt: str | None = None) -> dict[str, Any]: ...

    def get_version(
        self, subject: str, version: str | int, deleted: bool = False, fmt: str | None = None
    ) -> dict[str, Any]: ...


def _is_not_found(exc: Exception) -> bool:
    return type(exc).__name__ in ("SchemaNotFound", "SubjectNotFound", "VersionNotFound")


class SchemaResolver:
    def __init__(self, registry: RegistryLike | None, latest_ttl_s: float = 5.0) -> None:
        self.registry = registry
        self.latest_ttl_s = latest_ttl_s
        self._lock = threading.Lock()
        self._by_id: dict[tuple[int, str], PayloadDecoder] = {}
        self._latest: dict[tuple[str, str], tuple[float, PayloadDecoder]] = {}

    def _need_registry(self) -> RegistryLike:
        if self.registry is None:
            raise TableTopicError("no schema registry is configured for schema-driven conversion")
        return self.registry

    def by_id(self, schema_id: int, message_name: str = "") -> PayloadDecoder:
        key = (schema_id, message_name)
        found = self._by_id.get(key)
        if found is not None:
            return found
        reg = self._need_registry()
        try:
            body = reg.get_schema(schema_id)
        except Exception as exc:
            if _is_not_found(exc):
                raise InvalidDataError(f"schema id {schema_id} is not in the registry") from exc
            raise
        decoder = self._build(schema_id, body, message_name)
        with self._lock:
            self._by_id[key] = decoder
        return decoder

    def latest(self, subject: str, message_name: str = "") -> PayloadDecoder:
        key = (subject, message_name)
        now = time.monotonic()
        cached = self._latest.get(key)
        if cached is not None and now - cached[0] < self.latest_ttl_s:
            return cached[1]
        reg = self._need_registry()
        try:
            version = reg.get_version(subject, "latest")
        except Exception as exc:
            if _is_not_found(exc):
                raise InvalidDataError(
                    f"subject {subject!r} has no schema in the registry"
                ) from exc
            raise
        decoder = self.by_id(int(version["id"]), message_name)
        with self._lock:
            self._latest[key] = (now, decoder)
        return decoder

    # ------------------------------------------------------------------ build
    def _references(
        self, refs: list[dict[str, Any]], fmt: str | None, seen: set[tuple[str, int]]
    ) -> list[dict[str, Any]]:
        """Referenced versions, dependencies first."""
        reg = self._need_registry()
        out: list[dict[str, Any]] = []
        for ref in refs or []:
            ver = reg.get_version(ref["subject"], ref["version"], fmt=fmt)
            mark = (ver["subject"], int(ver["version"]))
            if mark in seen:
                continue
            seen.add(mark)
            out += self._references(ver.get("references") or [], fmt, seen)
            out.append({**ver, "name": ref["name"]})
        return out

    def _build(self, schema_id: int, body: dict[str, Any], message_name: str) -> PayloadDecoder:
        kind = (body.get("schemaType") or "AVRO").upper()
        refs = body.get("references") or []
        if kind == "AVRO":
            avro_deps = self._references(refs, None, set())
            return AvroDecoder(schema_id, body["schema"], [d["schema"] for d in avro_deps])
        if kind == "JSON":
            return JsonSchemaDecoder(schema_id, body["schema"])
        if kind == "PROTOBUF":
            reg = self._need_registry()
            main_b64 = reg.get_schema(schema_id, fmt="serialized")["schema"]
            main = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(main_b64))
            deps: list[descriptor_pb2.FileDescriptorProto] = []
            for d in self._references(refs, "serialized", set()):
                proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(d["schema"]))
                proto.name = d["name"]
                deps.append(proto)
            have = {d.name for d in deps}
            deps = _with_well_known(list(main.dependency), have) + deps
            return ProtobufDecoder(schema_id, main, deps, message_name)
        raise TableTopicError(f"unsupported schema type {kind} for schema {schema_id}")


def _with_well_known(names: list[str], have: set[str]) -> list[descriptor_pb2.FileDescriptorProto]:
    """google/protobuf/*.proto imports from the default pool, dependencies first."""
    out: list[descriptor_pb2.FileDescriptorProto] = []
    seen = set(have)

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        if name.startswith("google/protobuf/"):
            import importlib

            module = (
                "google.protobuf."
                + name.removeprefix("google/protobuf/").removesuffix(".proto")
                + "_pb2"
            )
            try:
                importlib.import_module(module)
            except ImportError:
                return
        try:
            found = descriptor_pool.Default().FindFileByName(name)
        except KeyError:
            return
        for dep in found.dependencies:
            visit(dep.name)
        proto = descriptor_pb2.FileDescriptorProto()
        found.CopyToProto(proto)
        out.append(proto)

    for n in names:
        visit(n)
    return out
