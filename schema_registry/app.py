"""The Confluent-compatible REST API: ``create_app(RegistrySettings()) -> FastAPI``."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any
from urllib.parse import quote, unquote_plus

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from schema_registry.auth import (
    CredentialLookup,
    Grants,
    RegistryAuth,
    RegistryAuthMiddleware,
    check_tls_files,
    parse_auth_modes,
)
from schema_registry.errors import (
    MalformedRequest,
    RequestTooLarge,
    RouteNotFound,
    SchemaRegistryError,
    StoreError,
)
from schema_registry.formats import FORMATS
from schema_registry.openapi import (
    ClusterId,
    CompatibilityResult,
    ConfigBody,
    ModeBody,
    Registered,
    SchemaBody,
    SchemaByGuid,
    SchemaById,
    SchemaType,
    ServerVersion,
    SubjectVersion,
    SubjectVersionSchema,
    answers,
    body,
    install_openapi,
)
from schema_registry.service import RegistryService, SchemaRequest
from schema_registry.store import SchemaStore, open_store

__all__ = ["RegistrySettings", "create_app", "CONTENT_TYPE"]

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistrySettings(BaseSettings):
    """Schema registry settings (env prefix ``TIDELAKE_REGISTRY_``)."""

    model_config = SettingsConfigDict(env_prefix="TIDELAKE_REGISTRY_")

    store_url: str = "sqlite:///tidelake-data/schema-registry.db"
    max_body_bytes: int = 16 * 1024 * 1024
    # Security (schema_registry/auth.py): "none", "basic", "bearer" or "basic,bearer";
    # bearer_tokens maps a static token to its user; roles maps a user to grants
    # ("read", "write:orders", "admin:team-*"); no roles = any authenticated user may do all.
    auth: str = "none"
    bearer_tokens: dict[str, str] = Field(default_factory=dict)
    roles: dict[str, list[str]] = Field(default_factory=dict)
    # TLS on the registry listener (both set: HTTPS only)
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None

    @field_validator("store_url")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        scheme = value.split(":", 1)[0].lower()
        if scheme not in ("memory", "sqlite", "postgresql", "postgres"):
            raise ValueError(
                f"store_url {value!r}: expected memory://, sqlite:///path or postgresql://..."
            )
        return value

    @field_validator("auth")
    @classmethod
    def _auth_modes(cls, value: str) -> str:
        parse_auth_modes(value)
        return value

    @field_validator("roles")
    @classmethod
    def _grants(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        Grants(value)
        return value

    @model_validator(mode="after")
    def _tls_files(self) -> RegistrySettings:
        try:
            check_tls_files(self.ssl_certfile, self.ssl_keyfile)
        except ValueError as exc:  # a check over the section names its key by variable
            key = "SSL_CERTFILE" if self.ssl_certfile else "SSL_KEYFILE"
            raise ValueError(f"TIDELAKE_REGISTRY_{key}: {exc}") from None
        return self

    @field_validator("max_body_bytes")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("max_body_bytes must be positive")
        return value


class RegistryResponse(JSONResponse):
    media_type = CONTENT_TYPE

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _error_response(error: SchemaRegistryError) -> RegistryResponse:
    return RegistryResponse(error.to_json(), status_code=error.http_status)


_SCHEMA_BY_ID = re.compile(r"^/schemas/ids/([0-9]{1,10})$")


class _SchemaByIdFastPath:
    """Answers ``GET /schemas/ids/{id}`` from the service's memory cache without routing:
    it is what every deserializer calls on every new id. Misses go down the normal stack."""

    def __init__(self, app: ASGIApp, service: RegistryService) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            match = _SCHEMA_BY_ID.match(scope["path"])
            query = scope.get("query_string", b"")
            if match and (not query or query.startswith(b"subject=") and b"&" not in query):
                subject = unquote_plus(query[8:].decode("latin-1")) if query else None
                body = self.service.cached_schema(int(match.group(1)), None, subject)
                if body is not None:
                    await RegistryResponse(body)(scope, receive, send)
                    return
        await self.app(scope, receive, send)


class _ContextPrefix:
    """Serves ``/contexts/{ctx}/...`` as the same API scoped to a schema context, so a client
    configured with ``http://host:8081/contexts/.team`` works in ``.team``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] == "http" and path.startswith("/contexts/"):
            rewritten = self._rewrite(path, scope.get("query_string", b"").decode("latin-1"))
            if rewritten is not None:
                new_path, query = rewritten
                scope = {
                    **scope,
                    "path": new_path,
                    "raw_path": new_path.encode(),
                    "query_string": query.encode("latin-1"),
                }
        await self.app(scope, receive, send)

    @staticmethod
    def _rewrite(path: str, query: str) -> tuple[str, str] | None:
        parts = path.split("/", 3)  # "", "contexts", ctx, rest
        if len(parts) < 4 or not parts[2]:
            return None
        context, rest = parts[2], "/" + parts[3]
        prefix = "" if context == "." else f":{context}:"

        def qualify(subject: str) -> str:
            return subject if subject.startswith(":.") else prefix + subject

        def add(param: str) -> str:
            return f"{query}&{param}" if query else param

        head, _, tail = rest[1:].partition("/")
        if head == "subjects":
            if not tail:
                return "/subjects", add(f"subjectPrefix={quote(prefix)}") if prefix else query
            subject, sep, more = tail.partition("/versions")
            return f"/subjects/{qualify(subject)}{sep}{more}", query
        if head == "compatibility" and tail.startswith("subjects/"):
            return f"/compatibility/subjects/{qualify(tail[len('subjects/') :])}", query
        if head in ("config", "mode"):
            target = qualify(tail) if tail else prefix
            return (f"/{head}/{target}" if target else f"/{head}"), query
        if head == "schemas":
            if tail.startswith("ids/"):
                return f"/schemas/{tail}", add(f"subject={quote(prefix)}") if prefix else query
            if tail == "types":
                return "/schemas/types", query
            if not tail:
                return "/schemas", add(f"subjectPrefix={quote(prefix)}") if prefix else query
        return None


class _BodyLimit:
    """Refuses bodies over ``limit`` bytes with 413, by header or while streaming."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                await self._refuse(scope, receive, send)
                return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise RequestTooLarge(f"Request body larger than {self.limit} bytes")
            return message

        await self.app(scope, limited, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        error = RequestTooLarge(f"Request body larger than {self.limit} bytes")
        await _error_response(error)(scope, receive, send)


def _allowed_methods(app: FastAPI, scope: Scope) -> str:
    """Every method some route serves at this path (Starlette names only the first route's)."""
    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    methods.discard("HEAD")
    order = ("GET", "POST", "PUT", "DELETE")
    return ", ".join(sorted(methods, key=lambda m: (order.index(m) if m in order else 9, m)))


async def _json_body(request: Request) -> Any:
    raw = await request.body()
    if not raw.strip():
        raise MalformedRequest("Request body is empty")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise MalformedRequest(f"Unexpected character in request body: {exc}") from None
    except RecursionError:
        raise MalformedRequest("Request body nests too deeply") from None


def _build_routes(app: FastAPI, svc: RegistryService) -> None:  # noqa: C901 - route table
    @app.get("/", response_model=None, responses=answers(dict[str, Any]))
    def root() -> dict[str, Any]:
        return {}

    @app.get("/schemas/types", response_model=None, responses=answers(list[SchemaType]))
    def schema_types() -> list[str]:
        return sorted(FORMATS, key=lambda t: ("JSON", "PROTOBUF", "AVRO").index(t))

    @app.get("/schemas", response_model=None, responses=answers(list[SubjectVersionSchema]))
    def list_schemas(
        subjectPrefix: str = "",
        deleted: bool = False,
        latestOnly: bool = False,
        offset: int = 0,
        limit: int = -1,
    ) -> list[dict[str, Any]]:
        return svc.list_schemas(subjectPrefix, deleted, latestOnly, offset, limit)

    @app.get("/schemas/ids/{schema_id}", response_model=None, responses=answers(SchemaById, 422))
    async def get_schema(
        schema_id: int, subject: str | None = None, format: str | None = None
    ) -> Response:
        body = svc.cached_schema(schema_id, format, subject)
        if body is None:
            body = await run_in_threadpool(svc.get_schema, schema_id, format, subject)
        return RegistryResponse(body)

    @app.get("/schemas/guids/{guid}", response_model=None, responses=answers(SchemaByGuid, 422))
    def get_schema_by_guid(guid: str, format: str | None = None) -> dict[str, Any]:
        return svc.get_schema_by_guid(guid, format)

    @app.get(
        "/schemas/ids/{schema_id}/schema",
        response_model=None,
        responses=answers(None, 422, text=True),
    )
    def get_schema_text(
        schema_id: int, format: str | None = None, subject: str | None = None
    ) -> Response:
        body = svc.get_schema(schema_id, format, subject)["schema"]
        return Response(body, media_type=CONTENT_TYPE)

    @app.get("/schemas/ids/{schema_id}/subjects", response_model=None, responses=answers(list[str]))
    def schema_subjects(
        schema_id: int, deleted: bool = False, subject: str | None = None
    ) -> list[str]:
        return sorted({v.subject for v in svc.schema_versions(schema_id, deleted, subject)})

    @app.get(
        "/schemas/ids/{schema_id}/versions",
        response_model=None,
        responses=answers(list[SubjectVersion]),
    )
    def schema_versions(
        schema_id: int, deleted: bool = False, subject: str | None = None
    ) -> list[dict[str, Any]]:
        rows = svc.schema_versions(schema_id, deleted, subject)
        return [{"subject": v.subject, "version": v.version} for v in rows]

    @app.get("/subjects", response_model=None, responses=answers(list[str]))
    def list_subjects(
        subjectPrefix: str = "", deleted: bool = False, deletedOnly: bool = False
    ) -> list[str]:
        return svc.list_subjects(subjectPrefix, deleted, deletedOnly)

    @app.get(
        "/subjects/{subject:path}/metadata",
        response_model=None,
        responses=answers(SubjectVersionSchema, 422),
    )
    def latest_with_metadata(
        subject: str,
        key: Annotated[list[str] | None, Query()] = None,
        value: Annotated[list[str] | None, Query()] = None,
        deleted: bool = False,
        format: str | None = None,
    ) -> dict[str, Any]:
        pairs = dict(zip(key or [], value or [], strict=False))
        return svc.latest_with_metadata(subject, pairs, deleted, format)

    @app.get(
        "/subjects/{subject:path}/versions/{version}/schema",
        response_model=None,
        responses=answers(None, 422, text=True),
    )
    def get_version_schema(subject: str, version: str, deleted: bool = False) -> Response:
        body = svc.get_version(subject, version, deleted)["schema"]
        return Response(body, media_type=CONTENT_TYPE)

    @app.get(
        "/subjects/{subject:path}/versions/{version}/referencedby",
        response_model=None,
        responses=answers(list[int], 422),
    )
    def referenced_by(subject: str, version: str) -> list[int]:
        return svc.referenced_by(subject, version)

    @app.get(
        "/subjects/{subject:path}/versions/{version}",
        response_model=None,
        responses=answers(SubjectVersionSchema, 422),
    )
    def get_version(
        subject: str, version: str, deleted: bool = False, format: str | None = None
    ) -> dict[str, Any]:
        return svc.get_version(subject, version, deleted, format)

    @app.get("/subjects/{subject:path}/versions", response_model=None, responses=answers(list[int]))
    def list_versions(subject: str, deleted: bool = False, deletedOnly: bool = False) -> list[int]:
        return svc.list_versions(subject, deleted, deletedOnly)

    @app.post(
        "/subjects/{subject:path}/versions",
        response_model=None,
        responses=answers(Registered, 409, 413, 422),
        openapi_extra=body(SchemaBody),
    )
    async def register(subject: str, request: Request, normalize: bool = False) -> dict[str, Any]:
        body = SchemaRequest.from_json(await _json_body(request))
        return await run_in_threadpool(svc.register, subject, body, normalize)

    @app.post(
        "/subjects/{subject:path}",
        response_model=None,
        responses=answers(SubjectVersionSchema, 413, 422),
        openapi_extra=body(SchemaBody),
    )
    async def lookup(
        subject: str, request: Request, normalize: bool = False, deleted: bool = False
    ) -> dict[str, Any]:
        body = SchemaRequest.from_json(await _json_body(request))
        return await run_in_threadpool(svc.lookup, subject, body, normalize, deleted)

    @app.delete(
        "/subjects/{subject:path}/versions/{version}",
        response_model=None,
        responses=answers(int, 422),
    )
    def delete_version(subject: str, version: str, permanent: bool = False) -> int:
        return svc.delete_version(subject, version, permanent)

    @app.delete("/subjects/{subject:path}", response_model=None, responses=answers(list[int], 422))
    def delete_subject(subject: str, permanent: bool = False) -> list[int]:
        return svc.delete_subject(subject, permanent)

    async def _compat(
        subject: str, version: str | None, request: Request, verbose: bool, normalize: bool
    ) -> dict[str, Any]:
        body = SchemaRequest.from_json(await _json_body(request))
        messages = await run_in_threadpool(
            svc.test_compatibility, subject, version, body, normalize
        )
        reply: dict[str, Any] = {"is_compatible": not messages}
        if verbose:
            reply["messages"] = messages
        return reply

    @app.post(
        "/compatibility/subjects/{subject:path}/versions/{version}",
        response_model=None,
        responses=answers(CompatibilityResult, 413, 422),
        openapi_extra=body(SchemaBody),
    )
    async def compat_version(
        subject: str, version: str, request: Request, verbose: bool = False, normalize: bool = False
    ) -> dict[str, Any]:
        return await _compat(subject, version, request, verbose, normalize)

    @app.post(
        "/compatibility/subjects/{subject:path}/versions",
        response_model=None,
        responses=answers(CompatibilityResult, 413, 422),
        openapi_extra=body(SchemaBody),
    )
    async def compat_all(
        subject: str, request: Request, verbose: bool = False, normalize: bool = False
    ) -> dict[str, Any]:
        return await _compat(subject, None, request, verbose, normalize)

    @app.get("/config", response_model=None, responses=answers(ConfigBody))
    def get_global_config() -> dict[str, Any]:
        return svc.get_config(None)

    @app.put(
        "/config",
        response_model=None,
        responses=answers(ConfigBody, 413, 422),
        openapi_extra=body(ConfigBody),
    )
    async def put_global_config(request: Request) -> dict[str, Any]:
        body = await _json_body(request)
        return await run_in_threadpool(svc.set_config, None, body)

    @app.delete("/config", response_model=None, responses=answers(ConfigBody))
    def delete_global_config() -> dict[str, Any]:
        return svc.delete_config(None)

    @app.get("/config/{subject:path}", response_model=None, responses=answers(ConfigBody))
    def get_config(subject: str, defaultToGlobal: bool = False) -> dict[str, Any]:
        return svc.get_config(subject, defaultToGlobal)

    @app.put(
        "/config/{subject:path}",
        response_model=None,
        responses=answers(ConfigBody, 413, 422),
        openapi_extra=body(ConfigBody),
    )
    async def put_config(subject: str, request: Request) -> dict[str, Any]:
        body = await _json_body(request)
        return await run_in_threadpool(svc.set_config, subject, body)

    @app.delete("/config/{subject:path}", response_model=None, responses=answers(ConfigBody))
    def delete_config(subject: str) -> dict[str, Any]:
        return svc.delete_config(subject)

    @app.get("/mode", response_model=None, responses=answers(ModeBody))
    def get_global_mode() -> dict[str, Any]:
        return {"mode": svc.get_mode(None)}

    @app.put(
        "/mode",
        response_model=None,
        responses=answers(ModeBody, 413, 422),
        openapi_extra=body(ModeBody),
    )
    async def put_global_mode(request: Request, force: bool = False) -> dict[str, Any]:
        body = await _json_body(request)
        return {"mode": await run_in_threadpool(svc.set_mode, None, body, force)}

    @app.get("/mode/{subject:path}", response_model=None, responses=answers(ModeBody))
    def get_mode(subject: str, defaultToGlobal: bool = False) -> dict[str, Any]:
        return {"mode": svc.get_mode(subject, defaultToGlobal)}

    @app.put(
        "/mode/{subject:path}",
        response_model=None,
        responses=answers(ModeBody, 413, 422),
        openapi_extra=body(ModeBody),
    )
    async def put_mode(subject: str, request: Request, force: bool = False) -> dict[str, Any]:
        body = await _json_body(request)
        return {"mode": await run_in_threadpool(svc.set_mode, subject, body, force)}

    @app.delete("/mode/{subject:path}", response_model=None, responses=answers(ModeBody))
    def delete_mode(subject: str) -> dict[str, Any]:
        return {"mode": svc.delete_mode(subject)}

    @app.get("/v1/metadata/id", response_model=None, responses=answers(ClusterId))
    def metadata_id() -> dict[str, Any]:
        return {"scope": {"path": [], "clusters": {"schema-registry-cluster": "tidelake"}}}

    @app.get("/v1/metadata/version", response_model=None, responses=answers(ServerVersion))
    def metadata_version() -> dict[str, Any]:
        return {"version": "7.9.0-tidelake", "commitId": "tidelake"}

    @app.get("/contexts", response_model=None, responses=answers(list[str]))
    def contexts() -> list[str]:
        return svc.list_contexts()


def create_app(
    settings: RegistrySettings | None = None,
    *,
    store: SchemaStore | None = None,
    credentials: CredentialLookup | None = None,
    token_verifier: Callable[[str], str | None] | None = None,
) -> FastAPI:
    """Build the registry app. Opens ``settings.store_url`` unless a ``store`` is passed in
    (then the caller owns it); an opened store is closed when the app shuts down.
    ``credentials``: the users' SCRAM credentials, needed by ``auth = "basic"``;
    ``token_verifier``: the user of a bearer token the platform issued, else None."""
    settings = settings or RegistrySettings()
    owned = store is None
    the_store = open_store(settings.store_url) if store is None else store
    service = RegistryService(the_store)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        if owned:
            the_store.close()

    app = FastAPI(
        title="Tidelake Schema Registry",
        default_response_class=RegistryResponse,
        lifespan=lifespan,
        version="7.9.0-tidelake",
        description="Confluent Schema Registry compatible API. Errors are "
        '{"error_code": <Confluent code>, "message": ...}.',
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    install_openapi(app)
    app.state.registry = service
    app.state.settings = settings

    @app.exception_handler(SchemaRegistryError)
    async def _registry_error(_: Request, exc: SchemaRegistryError) -> Response:
        return _error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        if any(e.get("loc", ("",))[0] == "path" for e in errors):
            return _error_response(RouteNotFound())
        detail = "; ".join(
            f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}" for e in errors
        )
        return RegistryResponse({"error_code": 400, "message": detail}, status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        phrase = {404: "Not Found", 405: "Method Not Allowed"}.get(exc.status_code, str(exc.detail))
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = _allowed_methods(app, request.scope)
        return RegistryResponse(
            {"error_code": exc.status_code, "message": f"HTTP {exc.status_code} {phrase}"},
            status_code=exc.status_code,
            headers=headers,
        )

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> Response:
        return _error_response(StoreError(f"Internal error: {type(exc).__name__}: {exc}"))

    _build_routes(app, service)
    app.add_middleware(_BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(_SchemaByIdFastPath, service=service)
    auth = RegistryAuth(
        parse_auth_modes(settings.auth),
        credentials,
        settings.bearer_tokens,
        token_verifier=token_verifier,
    )

    def holders(schema: int | str, subject: str | None) -> list[str]:
        """Subjects holding an id (in ``subject``'s context) or a GUID (in any
        context); soft-deleted versions count: the schema still reads."""
        if isinstance(schema, int):
            try:
                return [v.subject for v in service.schema_versions(schema, True, subject)]
            except SchemaRegistryError:
                return []
        try:
            prefix = uuid.UUID(schema).hex
        except ValueError:
            return []
        with service.store.read() as tx:
            return [
                v.subject
                for stored in tx.schemas_by_fingerprint_prefix(prefix)
                for v in tx.versions_of_schema(stored.id, stored.context)
            ]

    # inside the context rewrite (grants see qualified subjects), outside everything else
    app.add_middleware(
        RegistryAuthMiddleware, auth=auth, grants=Grants(settings.roles), holders=holders
    )
    app.add_middleware(_ContextPrefix)
    return app
