"""The OpenAPI description of the registry API: request and response bodies as clients see them.

The handlers read their JSON bodies themselves (so that a bad body gets Confluent's error,
not FastAPI's), so the models here only describe: ``body(...)`` documents a request body,
``answers(...)`` a route's success body and the errors it can give, all in Confluent's
``{"error_code": ..., "message": ...}`` shape.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BODY_MODELS", "MEDIA_TYPES", "answers", "body", "install_openapi"]

MEDIA_TYPES = (
    "application/vnd.schemaregistry.v1+json",
    "application/vnd.schemaregistry+json",
    "application/json",
)
SchemaType = Literal["AVRO", "JSON", "PROTOBUF"]
Level = Literal[
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
    "NONE",
]
Mode = Literal["READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT"]


class ErrorBody(BaseModel):
    """Every error: Confluent's code (40401, 42201, ...; or the HTTP status) and a message."""

    error_code: int
    message: str


class SchemaReference(BaseModel):
    name: str
    subject: str
    version: int


class _Schema(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    schema_: str = Field(alias="schema")
    schemaType: SchemaType | None = Field(None, description="absent means AVRO")
    references: list[SchemaReference] | None = None
    metadata: dict[str, Any] | None = None
    ruleSet: dict[str, Any] | None = None


class SchemaBody(_Schema):
    """Register, look up or test a schema. ``id`` and ``version`` are for IMPORT mode."""

    model_config = ConfigDict(
        populate_by_name=True,
        json_schema_extra={
            "examples": [
                {
                    "schema": '{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}'
                },
                {
                    "schema": '{"type":"object","properties":{"id":{"type":"integer"}}}',
                    "schemaType": "JSON",
                },
                {
                    "schema": 'syntax = "proto3";\nmessage User { int64 id = 1; }',
                    "schemaType": "PROTOBUF",
                },
            ]
        },
    )

    id: int | None = None
    version: int | None = None


class SchemaById(_Schema):
    guid: str


class SchemaByGuid(SchemaById):
    id: int


class SubjectVersionSchema(SchemaById):
    subject: str
    version: int
    id: int


class Registered(BaseModel):
    id: int
    version: int | None = None
    guid: str | None = None


class SubjectVersion(BaseModel):
    subject: str
    version: int


class CompatibilityResult(BaseModel):
    is_compatible: bool
    messages: list[str] | None = Field(None, description="with ?verbose=true")


class ConfigBody(BaseModel):
    """A compatibility config; ``compatibility`` and ``compatibilityLevel`` are the same."""

    model_config = ConfigDict(extra="allow")

    compatibility: Level | None = None
    compatibilityLevel: Level | None = None
    normalize: bool | None = None
    validateFields: bool | None = None
    validateRules: bool | None = None
    alias: str | None = None
    compatibilityGroup: str | None = None
    compatibilityPolicy: str | None = None
    defaultMetadata: dict[str, Any] | None = None
    overrideMetadata: dict[str, Any] | None = None
    defaultRuleSet: dict[str, Any] | None = None
    overrideRuleSet: dict[str, Any] | None = None


class ModeBody(BaseModel):
    mode: Mode


class ClusterId(BaseModel):
    scope: dict[str, Any]


class ServerVersion(BaseModel):
    version: str
    commitId: str


BODY_MODELS: tuple[type[BaseModel], ...] = (SchemaBody, ConfigBody, ModeBody)

_ERRORS = {
    400: "Malformed request: bad JSON body or query parameter (error_code 400)",
    404: "Not found: subject 40401, version 40402, schema 40403, ... (or 404: no such route)",
    409: "Incompatible schema (error_code 409)",
    413: "Request body too large (error_code 413)",
    422: "Invalid input: schema 42201, version 42202, level 42203, mode 42204, ...; "
    "a body field of the wrong type 422",
    500: "Error in the backend data store (error_code 50001)",
}


def body(model: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra`` documenting a required JSON request body of ``model``."""
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {
        "requestBody": {
            "required": True,
            "content": {media: {"schema": ref} for media in MEDIA_TYPES},
        }
    }


def answers(ok: Any = None, *errors: int, text: bool = False) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route: its 200 body (a model, or the raw schema text) and errors.

    Every route can answer 400 (bad query parameter), 404 and 500; list the others."""
    out: dict[int | str, dict[str, Any]] = {}
    if text:
        out[200] = {
            "description": "The schema text, as registered",
            "content": {MEDIA_TYPES[0]: {"schema": {}}},
        }
    elif ok is not None:
        out[200] = {"model": ok, "description": "Successful Response"}
    for status in sorted({400, 404, 500, *errors}):
        out[status] = {"model": ErrorBody, "description": _ERRORS[status]}
    return out


def install_openapi(app: FastAPI) -> None:
    """Serve the document at ``/openapi.json``, with the request-body models as components."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        doc = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
        )
        components = doc.setdefault("components", {}).setdefault("schemas", {})
        # FastAPI documents its own 422 validation body; here a bad parameter is a 400 or 404
        # in Confluent's shape (see the app's RequestValidationError handler).
        for operations in doc.get("paths", {}).values():
            for operation in operations.values():
                fastapi_422 = operation.get("responses", {}).get("422", {})
                if "HTTPValidationError" in str(fastapi_422.get("content")):
                    del operation["responses"]["422"]
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)
        for model in BODY_MODELS:
            schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(schema.pop("$defs", {}))
            components[model.__name__] = schema
        app.openapi_schema = doc
        return doc

    app.openapi = openapi  # type: ignore[method-assign]
