"""The registry logic, free of HTTP: subjects, versions, ids, compatibility, config and modes.

Every write runs in one serialised store transaction, so "same schema under a
subject returns the same id and version" and id allocation hold under
concurrent requests and across processes sharing a PostgreSQL store.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from schema_registry.compatibility import DEFAULT_LEVEL, CompatibilityLevel, check_compatibility
from schema_registry.errors import (
    IdDoesNotMatch,
    IncompatibleSchema,
    InvalidCompatibilityLevel,
    InvalidMode,
    InvalidSchema,
    OperationNotPermitted,
    ReferenceExists,
    SchemaNotFound,
    SubjectCompatibilityNotConfigured,
    SubjectModeNotConfigured,
    SubjectNotFound,
    SubjectNotSoftDeleted,
    SubjectSoftDeleted,
    VersionNotFound,
    VersionNotSoftDeleted,
    VersionSoftDeleted,
)
from schema_registry.formats import ParsedSchema, ResolvedReference, get_format
from schema_registry.requests import LATEST as _LATEST
from schema_registry.requests import (
    SchemaRequest,
    check_config_fields,
    check_schema_id,
    check_subject,
    parse_version,
)
from schema_registry.store import (
    DEFAULT_CONTEXT,
    Reference,
    SchemaStore,
    StoredSchema,
    StoreTransaction,
    SubjectVersion,
    context_of,
)

__all__ = ["RegistryService", "SchemaRequest", "MODES", "parse_version"]

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
_GLOBAL = ""


def _fingerprint(schema_type: str, text: str, refs: Sequence[Reference], extras: str = "") -> str:
    parts: list[Any] = [schema_type, text, [[r.name, r.subject, r.version] for r in refs]]
    if extras:
        parts.append(extras)
    key = json.dumps(parts)
    return hashlib.sha256(key.encode()).hexdigest()


def _guid(fingerprint: str) -> str:
    return str(uuid.UUID(fingerprint[:32]))


def guid_of(stored: StoredSchema) -> str:
    """A schema's GUID: derived from its content fingerprint, so every broker agrees on it."""
    return _guid(stored.fingerprint)


class RegistryService:
    """Confluent Schema Registry semantics over a :class:`SchemaStore`."""

    def __init__(self, store: SchemaStore, *, parsed_cache_size: int = 1024) -> None:
        self.store = store
        self._cache: OrderedDict[tuple[str, int], ParsedSchema] = OrderedDict()
        self._cache_size = parsed_cache_size
        self._cache_lock = threading.Lock()
        self._by_id: dict[tuple[str, int, str | None], dict[str, Any]] = {}

    # ----------------------------------------------------------------- helpers
    def _resolve_references(
        self,
        tx: StoreTransaction,
        refs: Sequence[Reference],
        seen: set[tuple[str, int]] | None = None,
    ) -> tuple[list[ResolvedReference], tuple[Reference, ...]]:
        """Dependencies first, deduplicated; ``latest`` pinned to a version number."""
        seen = set() if seen is None else seen
        out: list[ResolvedReference] = []
        pinned: list[Reference] = []
        for ref in refs:
            rows = [v for v in tx.versions(ref.subject) if not v.deleted or ref.version != _LATEST]
            row = rows[-1] if ref.version == _LATEST and rows else None
            if ref.version != _LATEST:
                row = next((v for v in rows if v.version == ref.version), None)
            if row is None:
                raise InvalidSchema(
                    f"Invalid schema: reference {ref.name!r} to subject {ref.subject!r} "
                    f"version {ref.version} not found"
                )
            pinned.append(Reference(ref.name, ref.subject, row.version))
            if (ref.subject, row.version) in seen:
                continue
            seen.add((ref.subject, row.version))
            stored = tx.schema_by_id(row.schema_id, context_of(ref.subject))
            assert stored is not None
            deps, _ = self._resolve_references(tx, stored.references, seen)
            out += deps
            out.append(
                ResolvedReference(
                    ref.name, ref.subject, row.version, stored.schema_type, stored.schema
                )
            )
        return out, tuple(pinned)

    def _parse_request(
        self, tx: StoreTransaction, request: SchemaRequest
    ) -> tuple[ParsedSchema, tuple[Reference, ...]]:
        deps, pinned = self._resolve_references(tx, request.references)
        try:
            return get_format(request.schema_type).parse(request.schema, deps), pinned
        except RecursionError:
            raise InvalidSchema("Invalid schema: nested too deeply") from None

    def _parsed(
        self, tx: StoreTransaction, schema_id: int, context: str = DEFAULT_CONTEXT
    ) -> ParsedSchema:
        key = (context, schema_id)
        with self._cache_lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        stored = tx.schema_by_id(schema_id, context)
        if stored is None:
            raise SchemaNotFound(f"Schema {schema_id} not found")
        deps, _ = self._resolve_references(tx, stored.references)
        parsed = get_format(stored.schema_type).parse(stored.schema, deps)
        with self._cache_lock:
            self._cache[key] = parsed
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return parsed

    @staticmethod
    def _schema_json(stored: StoredSchema, text: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if stored.schema_type != "AVRO":
            out["schemaType"] = stored.schema_type
        if stored.references:
            out["references"] = [r.to_json() for r in stored.references]
        out["schema"] = stored.schema if text is None else text
        if stored.extras:
            out.update(json.loads(stored.extras))
        out["guid"] = guid_of(stored)
        return out

    def _version_json(
        self, tx: StoreTransaction, row: SubjectVersion, fmt: str | None = None
    ) -> dict[str, Any]:
        stored = tx.schema_by_id(row.schema_id, context_of(row.subject))
        if stored is None:
            raise SchemaNotFound(f"Schema {row.schema_id} not found")
        body = {"subject": row.subject, "version": row.version, "id": row.schema_id}
        body.update(self._schema_json(stored, self._formatted(tx, stored, fmt)))
        return body

    def _formatted(self, tx: StoreTransaction, stored: StoredSchema, fmt: str | None) -> str | None:
        if not fmt:
            return None
        return self._parsed(tx, stored.id, stored.context).formatted(fmt)

    @staticmethod
    def _live(rows: Sequence[SubjectVersion]) -> list[SubjectVersion]:
        return [v for v in rows if not v.deleted]

    def _find_version(
        self, tx: StoreTransaction, subject: str, version: str | int, *, deleted: bool = False
    ) -> SubjectVersion:
        number = parse_version(version)
        rows = tx.versions(subject)
        visible = rows if deleted else self._live(rows)
        if not visible:
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        if number == _LATEST:
            return visible[-1]
        row = next((v for v in visible if v.version == number), None)
        if row is None:
            raise VersionNotFound(f"Version {version} not found.")
        return row

    @staticmethod
    def _config_keys(subject: str) -> tuple[str, ...]:
        """Where settings are looked up: the subject, its context (``:.ctx:``), global."""
        context = context_of(subject)
        if context == DEFAULT_CONTEXT or subject == f":{context}:":
            return (subject, _GLOBAL)
        return (subject, f":{context}:", _GLOBAL)

    def _mode(self, tx: StoreTransaction, subject: str) -> str:
        global_mode = tx.get_mode(_GLOBAL) or "READWRITE"
        if global_mode == "READONLY_OVERRIDE" or not subject:
            return global_mode
        for key in self._config_keys(subject)[:-1]:
            found = tx.get_mode(key)
            if found is not None:
                return found
        return global_mode

    def _require_writable(self, tx: StoreTransaction, subject: str) -> str:
        mode = self._mode(tx, subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise OperationNotPermitted(f"Subject {subject} is in read-only mode")
        return mode

    def _level(self, tx: StoreTransaction, subject: str) -> CompatibilityLevel:
        for key in self._config_keys(subject):
            config = tx.get_config(key)
            if config and config.get("compatibilityLevel"):
                return CompatibilityLevel.parse(config["compatibilityLevel"])
        return DEFAULT_LEVEL

    def _normalize_default(self, tx: StoreTransaction, subject: str) -> bool:
        for key in self._config_keys(subject):
            config = tx.get_config(key)
            if config and "normalize" in config:
                return bool(config["normalize"])
        return False

    # ------------------------------------------------------------ schemas/ids
    def cached_schema(
        self, schema_id: int, fmt: str | None = None, subject: str | None = None
    ) -> dict[str, Any] | None:
        """``get_schema`` from memory, without I/O, if this process has served it before.

        Ids never change meaning, so the entry only goes stale when the id is permanently
        deleted; this process drops its entries then. (Another broker's permanent delete
        is seen once the entry is evicted: deserializers cache ids forever anyway.)"""
        return self._by_id.get((context_of(subject), schema_id, fmt))

    def get_schema(
        self, schema_id: int, fmt: str | None = None, subject: str | None = None
    ) -> dict[str, Any]:
        """The schema under ``schema_id`` in the context of ``subject`` (default context)."""
        context = context_of(subject)
        check_schema_id(schema_id)
        with self.store.read() as tx:
            stored = tx.schema_by_id(schema_id, context)
            if stored is None or not tx.versions_of_schema(schema_id, context):
                raise SchemaNotFound(f"Schema {schema_id} not found")
            body = self._schema_json(stored, self._formatted(tx, stored, fmt))
        if len(self._by_id) >= self._cache_size * 8:
            self._by_id.clear()
        self._by_id[(context, schema_id, fmt)] = body
        return body

    def get_schema_by_guid(self, guid: str, fmt: str | None = None) -> dict[str, Any]:
        """The schema whose GUID is ``guid`` (``GET /schemas/guids/{guid}``)."""
        try:
            prefix = uuid.UUID(guid).hex
        except ValueError:
            raise SchemaNotFound(f"Schema {guid} not found") from None
        with self.store.read() as tx:
            for stored in tx.schemas_by_fingerprint_prefix(prefix):
                if tx.versions_of_schema(stored.id, stored.context):
                    body = self._schema_json(stored, self._formatted(tx, stored, fmt))
                    body["id"] = stored.id
                    return body
        raise SchemaNotFound(f"Schema {guid} not found")

    def parsed_schema(self, schema_id: int, subject: str | None = None) -> ParsedSchema:
        """The parsed schema under ``schema_id`` (cached): what table topics decode with.

        ``AvroSchema.parsed``/``.named`` feed fastavro; ``ProtobufSchema.proto`` is the
        FileDescriptorProto; ``JsonSchema.value`` the JSON Schema document."""
        check_schema_id(schema_id)
        with self.store.read() as tx:
            return self._parsed(tx, schema_id, context_of(subject))

    def latest_version(self, subject: str) -> SubjectVersion:
        """The subject's latest live version (``SubjectNotFound`` if none)."""
        with self.store.read() as tx:
            return self._find_version(tx, subject, _LATEST)

    def list_contexts(self) -> list[str]:
        """``.`` plus every ``:.name:`` context prefix found on a subject."""
        found = {"."}
        for subject in self.list_subjects(deleted=True):
            if subject.startswith(":.") and subject.count(":") >= 2:
                found.add(subject[1 : subject.index(":", 1)])
        return sorted(found)

    def schema_versions(
        self, schema_id: int, deleted: bool = False, subject: str | None = None
    ) -> list[SubjectVersion]:
        check_schema_id(schema_id)
        with self.store.read() as tx:
            rows = tx.versions_of_schema(schema_id, context_of(subject))
            if not rows:
                raise SchemaNotFound(f"Schema {schema_id} not found")
            return rows if deleted else self._live(rows)

    def list_schemas(
        self,
        prefix: str = "",
        deleted: bool = False,
        latest_only: bool = False,
        offset: int = 0,
        limit: int = -1,
    ) -> list[dict[str, Any]]:
        with self.store.read() as tx:
            rows = [v for v in tx.all_versions() if v.subject.startswith(prefix)]
            rows = rows if deleted else self._live(rows)
            if latest_only:
                latest: dict[str, SubjectVersion] = {}
                for row in rows:
                    latest[row.subject] = row
                rows = list(latest.values())
            rows = rows[offset:] if limit < 0 else rows[offset : offset + limit]
            return [self._version_json(tx, row) for row in rows]

    # --------------------------------------------------------------- subjects
    def list_subjects(
        self, prefix: str = "", deleted: bool = False, deleted_only: bool = False
    ) -> list[str]:
        with self.store.read() as tx:
            rows = tx.all_versions()
        live = {v.subject for v in rows if not v.deleted}
        every = {v.subject for v in rows}
        chosen = every - live if deleted_only else every if deleted else live
        return sorted(s for s in chosen if s.startswith(prefix))

    def list_versions(
        self, subject: str, deleted: bool = False, deleted_only: bool = False
    ) -> list[int]:
        with self.store.read() as tx:
            rows = tx.versions(subject)
        if deleted_only:
            chosen = [v for v in rows if v.deleted]
        else:
            chosen = rows if deleted else self._live(rows)
        if not chosen and not (deleted_only and rows):
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        return [v.version for v in chosen]

    def get_version(
        self, subject: str, version: str | int, deleted: bool = False, fmt: str | None = None
    ) -> dict[str, Any]:
        with self.store.read() as tx:
            row = self._find_version(tx, subject, version, deleted=deleted)
            return self._version_json(tx, row, fmt)

    def latest_with_metadata(
        self,
        subject: str,
        wanted: dict[str, str],
        deleted: bool = False,
        fmt: str | None = None,
    ) -> dict[str, Any]:
        """The newest version whose ``metadata.properties`` hold every ``wanted`` pair."""
        with self.store.read() as tx:
            rows = tx.versions(subject)
            visible = rows if deleted else self._live(rows)
            if not visible:
                raise SubjectNotFound(f"Subject '{subject}' not found.")
            for row in reversed(visible):
                stored = tx.schema_by_id(row.schema_id, context_of(subject))
                if stored is None:
                    continue
                contract = json.loads(stored.extras) if stored.extras else {}
                props = (contract.get("metadata") or {}).get("properties") or {}
                if all(props.get(k) == v for k, v in wanted.items()):
                    return self._version_json(tx, row, fmt)
        raise SchemaNotFound(f"No version of subject '{subject}' has metadata {wanted}")

    def referenced_by(self, subject: str, version: str | int) -> list[int]:
        with self.store.read() as tx:
            row = self._find_version(tx, subject, version)
            return self._referrers(tx, row)

    def _referrers(self, tx: StoreTransaction, row: SubjectVersion) -> list[int]:
        found = tx.schemas_referencing(row.subject, row.version)
        return [i for ctx, i in found if self._live(tx.versions_of_schema(i, ctx))]

    def register(
        self, subject: str, request: SchemaRequest, normalize: bool = False
    ) -> dict[str, Any]:
        """Register under ``subject``; an identical live schema returns its id and version."""
        check_subject(subject)
        with self.store.read() as tx:
            parsed, pinned = self._parse_request(tx, request)
            normalize = normalize or self._normalize_default(tx, subject)
        text = parsed.normalized() if normalize else parsed.canonical()
        with self.store.write() as tx:
            mode = self._require_writable(tx, subject)
            importing = mode == "IMPORT"
            rows = tx.versions(subject)
            context = context_of(subject)
            extras = request.extras or self._latest_extras(tx, subject, rows)
            fingerprint = _fingerprint(request.schema_type, text, pinned, extras)
            existing_id = tx.schema_id_by_fingerprint(fingerprint, context)
            if request.id is not None and not importing:
                if existing_id != request.id:
                    raise OperationNotPermitted(
                        f"Subject {subject} is not in import mode; cannot register with id {request.id}"
                    )
            for row in self._live(rows):
                if row.schema_id == existing_id and request.version in (None, row.version):
                    return {"id": row.schema_id, "version": row.version, "guid": _guid(fingerprint)}
            if importing and request.id is not None:
                stored = tx.schema_by_id(request.id, context)
                if stored is not None and stored.fingerprint != fingerprint:
                    raise IdDoesNotMatch(
                        f"Overwrite new schema with id {request.id} is not permitted."
                    )
                schema_id = request.id
                is_new = stored is None
            else:
                if not importing:
                    self._assert_compatible(tx, subject, parsed, rows)
                schema_id = existing_id if existing_id is not None else tx.allocate_id(context)
                is_new = existing_id is None
            if is_new:
                tx.add_schema(
                    StoredSchema(
                        schema_id, request.schema_type, text, pinned, fingerprint, context, extras
                    )
                )
            if request.version is not None and importing:
                taken = next((v for v in rows if v.version == request.version), None)
                if taken is not None:
                    raise OperationNotPermitted(
                        f"Version {request.version} already exists in subject {subject}"
                    )
                version = request.version
            else:
                version = max((v.version for v in rows), default=0) + 1
            tx.add_version(SubjectVersion(subject, version, schema_id, False))
            return {"id": schema_id, "version": version, "guid": _guid(fingerprint)}

    def _latest_extras(
        self, tx: StoreTransaction, subject: str, rows: Sequence[SubjectVersion]
    ) -> str:
        """A registration without metadata/ruleSet keeps the latest version's (as Confluent)."""
        live = self._live(rows)
        if not live:
            return ""
        stored = tx.schema_by_id(live[-1].schema_id, context_of(subject))
        return stored.extras if stored is not None else ""

    def _assert_compatible(
        self,
        tx: StoreTransaction,
        subject: str,
        parsed: ParsedSchema,
        rows: Sequence[SubjectVersion],
    ) -> None:
        level = self._level(tx, subject)
        if level is CompatibilityLevel.NONE:
            return
        context = context_of(subject)
        existing = [(v.version, self._parsed(tx, v.schema_id, context)) for v in self._live(rows)]
        if existing and existing[-1][1].schema_type != parsed.schema_type:
            raise IncompatibleSchema(
                f"Schema being registered is incompatible with an earlier schema for subject "
                f'"{subject}", details: [schema type changed from {existing[-1][1].schema_type} '
                f"to {parsed.schema_type}]"
            )
        messages = check_compatibility(parsed, existing, level)
        if messages:
            raise IncompatibleSchema(
                f"Schema being registered is incompatible with an earlier schema for subject "
                f'"{subject}", details: [{"; ".join(messages)}]; compatibility: {level.value}'
            )

    def lookup(
        self, subject: str, request: SchemaRequest, normalize: bool = False, deleted: bool = False
    ) -> dict[str, Any]:
        with self.store.read() as tx:
            rows = tx.versions(subject)
            visible = rows if deleted else self._live(rows)
            if not visible:
                raise SubjectNotFound(f"Subject '{subject}' not found.")
            parsed, pinned = self._parse_request(tx, request)
            canonical = parsed.canonical()
            target = parsed.normalized() if normalize else ""
            for row in reversed(visible):
                stored = tx.schema_by_id(row.schema_id, context_of(subject))
                if stored is None or stored.schema_type != request.schema_type:
                    continue
                extras = request.extras or stored.extras
                if extras != stored.extras:
                    continue
                wanted = {_fingerprint(request.schema_type, canonical, pinned, extras)}
                if normalize:
                    wanted.add(_fingerprint(request.schema_type, target, pinned, extras))
                if stored.fingerprint in wanted or (
                    normalize
                    and self._parsed(tx, row.schema_id, context_of(subject)).normalized() == target
                ):
                    return self._version_json(tx, row)
            raise SchemaNotFound("Schema not found")

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        with self.store.write() as tx:
            self._require_writable(tx, subject)
            rows = tx.versions(subject)
            if not rows:
                raise SubjectNotFound(f"Subject '{subject}' not found.")
            live = self._live(rows)
            if permanent and live:
                raise SubjectNotSoftDeleted(
                    f"Subject '{subject}' was not deleted first before being permanently deleted"
                )
            if not permanent and not live:
                raise SubjectSoftDeleted(
                    f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
                )
            for row in live or rows:
                self._assert_unreferenced(tx, row)
            for row in rows:
                if permanent:
                    tx.remove_version(subject, row.version)
                else:
                    tx.set_deleted(subject, row.version)
            if permanent:
                tx.delete_config(subject)
                tx.delete_mode(subject)
                self._by_id.clear()
            return [v.version for v in (rows if permanent else live)]

    def _assert_unreferenced(self, tx: StoreTransaction, row: SubjectVersion) -> None:
        referrers = self._referrers(tx, row)
        if referrers:
            raise ReferenceExists(
                f"One or more references exist to the schema {{subject={row.subject}, "
                f"version={row.version}}}: ids {referrers}"
            )

    def delete_version(self, subject: str, version: str | int, permanent: bool = False) -> int:
        number = parse_version(version)
        with self.store.write() as tx:
            self._require_writable(tx, subject)
            rows = tx.versions(subject)
            if not rows or (not permanent and not self._live(rows)):
                raise SubjectNotFound(f"Subject '{subject}' not found.")
            candidates = rows if permanent else self._live(rows)
            if number == _LATEST:
                row = candidates[-1]
            else:
                found = next((v for v in rows if v.version == number), None)
                if found is None:
                    raise VersionNotFound(f"Version {version} not found.")
                row = found
            if permanent and not row.deleted:
                raise VersionNotSoftDeleted(
                    f"Subject '{subject}' Version {row.version} was not deleted first before being "
                    "permanently deleted"
                )
            if not permanent and row.deleted:
                raise VersionSoftDeleted(
                    f"Subject '{subject}' Version {row.version} was soft deleted.Set permanent=true "
                    "to delete permanently"
                )
            self._assert_unreferenced(tx, row)
            if permanent:
                tx.remove_version(subject, row.version)
                self._by_id.clear()
            else:
                tx.set_deleted(subject, row.version)
            return row.version

    # ---------------------------------------------------------- compatibility
    def test_compatibility(
        self,
        subject: str,
        version: str | int | None,
        request: SchemaRequest,
        normalize: bool = False,
    ) -> list[str]:
        """Messages why ``request`` is incompatible (empty: compatible). ``version=None``: all."""
        with self.store.read() as tx:
            parsed, _ = self._parse_request(tx, request)
            rows = self._live(tx.versions(subject))
            level = self._level(tx, subject)
            if version is not None:
                number = parse_version(version)
                if number != _LATEST:
                    if not tx.versions(subject):
                        raise SubjectNotFound(f"Subject '{subject}' not found.")
                    picked = [v for v in rows if v.version == number]
                    if not picked:
                        raise VersionNotFound(f"Version {version} not found.")
                    rows = picked
                else:
                    rows = rows[-1:]
            existing = [
                (v.version, self._parsed(tx, v.schema_id, context_of(subject))) for v in rows
            ]
        if existing and existing[-1][1].schema_type != parsed.schema_type:
            return [
                f"schema type changed from {existing[-1][1].schema_type} to {parsed.schema_type}"
            ]
        return check_compatibility(parsed, existing, level)

    # ----------------------------------------------------------------- config
    def get_config(
        self, subject: str | None = None, default_to_global: bool = False
    ) -> dict[str, Any]:
        with self.store.read() as tx:
            if subject:
                found = tx.get_config(subject)
                if found is not None:
                    return found
                if not default_to_global:
                    raise SubjectCompatibilityNotConfigured(
                        f"Subject '{subject}' does not have subject-level compatibility configured"
                    )
            config = tx.get_config(_GLOBAL) or {}
            config.setdefault("compatibilityLevel", DEFAULT_LEVEL.value)
            return config

    def set_config(self, subject: str | None, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise InvalidCompatibilityLevel(
                "Invalid compatibility level: body must be a JSON object"
            )
        check_config_fields(body)
        level_value = body.get("compatibility", body.get("compatibilityLevel"))
        config: dict[str, Any] = {
            k: v for k, v in body.items() if k not in ("compatibility", "compatibilityLevel")
        }
        if level_value is not None or not config:
            config["compatibilityLevel"] = CompatibilityLevel.parse(level_value).value
        if subject:
            check_subject(subject)
        with self.store.write() as tx:
            merged = dict(tx.get_config(subject or _GLOBAL) or {})
            merged.update(config)
            tx.put_config(subject or _GLOBAL, merged)
        reply = {k: v for k, v in config.items() if k != "compatibilityLevel"}
        if "compatibilityLevel" in config:
            reply["compatibility"] = config["compatibilityLevel"]
        return reply

    def delete_config(self, subject: str | None = None) -> dict[str, Any]:
        with self.store.write() as tx:
            previous = tx.get_config(subject or _GLOBAL)
            if subject and previous is None:
                if not tx.versions(subject):
                    raise SubjectNotFound(f"Subject '{subject}' not found.")
                raise SubjectCompatibilityNotConfigured(
                    f"Subject '{subject}' does not have subject-level compatibility configured"
                )
            tx.delete_config(subject or _GLOBAL)
        previous = previous or {}
        previous.setdefault("compatibilityLevel", DEFAULT_LEVEL.value)
        return previous

    # ------------------------------------------------------------------- mode
    def get_mode(self, subject: str | None = None, default_to_global: bool = False) -> str:
        with self.store.read() as tx:
            if subject:
                found = tx.get_mode(subject)
                if found is not None:
                    return found
                if not default_to_global:
                    raise SubjectModeNotConfigured(
                        f"Subject '{subject}' does not have subject-level mode configured"
                    )
            return tx.get_mode(_GLOBAL) or "READWRITE"

    def set_mode(self, subject: str | None, body: Any, force: bool = False) -> str:
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise InvalidMode(
                f"Invalid mode {mode!r}. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, IMPORT"
            )
        mode = mode.upper()
        if subject:
            check_subject(subject)
        with self.store.write() as tx:
            if mode == "IMPORT" and not force:
                has_schemas = bool(tx.versions(subject)) if subject else bool(tx.subjects())
                if has_schemas:
                    raise OperationNotPermitted(
                        "Cannot import since found existing subjects; use force=true to override"
                    )
            tx.put_mode(subject or _GLOBAL, mode)
        return mode

    def delete_mode(self, subject: str | None = None) -> str:
        with self.store.write() as tx:
            previous = tx.get_mode(subject or _GLOBAL)
            if subject and previous is None:
                raise SubjectModeNotConfigured(
                    f"Subject '{subject}' does not have subject-level mode configured"
                )
            tx.delete_mode(subject or _GLOBAL)
        return previous or "READWRITE"
