"""The Iceberg REST error model and the mapping from pyiceberg's exceptions.

Every failure leaves the service as ``{"error": {"message", "type", "code"}}``
with the HTTP status the Iceberg REST OpenAPI spec gives for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

import pydantic
from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pyiceberg.exceptions import (
    BadRequestError,
    CommitFailedException,
    CommitStateUnknownException,
    ForbiddenError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchIdentifierError,
    NoSuchNamespaceError,
    NoSuchPropertyException,
    NoSuchTableError,
    NoSuchViewError,
    ServiceUnavailableError,
    TableAlreadyExistsError,
    UnauthorizedError,
    ValidationError,
    ValidationException,
    ViewAlreadyExistsError,
    WaitingForLockException,
)
from starlette.exceptions import HTTPException as StarletteHTTPException


class UnsupportedOperationError(Exception):
    """An operation the spec defines that this catalog does not support (406)."""


__all__ = [
    "IcebergErrorRoute",
    "IcebergHTTPError",
    "UnsupportedOperationError",
    "client_input",
    "error_response",
    "to_error_response",
]

_log = logging.getLogger(__name__)


class IcebergHTTPError(Exception):
    """An error the service answers with directly: status, spec type and message."""

    def __init__(self, code: int, type_: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.type = type_
        self.message = message


# Order matters: subclasses before their bases.
_MAPPING: tuple[tuple[type[BaseException], int, str], ...] = (
    (NoSuchNamespaceError, 404, "NoSuchNamespaceException"),
    (NoSuchTableError, 404, "NoSuchTableException"),
    (NoSuchViewError, 404, "NoSuchViewException"),
    (NoSuchIdentifierError, 404, "NoSuchTableException"),
    (TableAlreadyExistsError, 409, "AlreadyExistsException"),
    (NamespaceAlreadyExistsError, 409, "AlreadyExistsException"),
    (ViewAlreadyExistsError, 409, "AlreadyExistsException"),
    (NamespaceNotEmptyError, 409, "NamespaceNotEmptyException"),
    (CommitFailedException, 409, "CommitFailedException"),
    (WaitingForLockException, 409, "CommitFailedException"),
    (CommitStateUnknownException, 500, "CommitStateUnknownException"),
    (UnauthorizedError, 401, "NotAuthorizedException"),
    (ForbiddenError, 403, "NotAuthorizedException"),
    (ServiceUnavailableError, 503, "ServiceUnavailableException"),
    (BadRequestError, 400, "BadRequestException"),
    (ValidationError, 400, "ValidationException"),
    (ValidationException, 400, "ValidationException"),
    (NoSuchPropertyException, 400, "BadRequestException"),
    (pydantic.ValidationError, 400, "BadRequestException"),
    (UnsupportedOperationError, 406, "UnsupportedOperationException"),
    # pyiceberg signals operations a backing catalog lacks (e.g. register with
    # overwrite on SQL) with the builtin; the spec's answer is the same 406.
    (NotImplementedError, 406, "UnsupportedOperationException"),
    (ValueError, 400, "BadRequestException"),
    (KeyError, 400, "BadRequestException"),
)


_HTTP_TYPES = {
    400: "BadRequestException",
    401: "NotAuthorizedException",
    403: "NotAuthorizedException",
    404: "NotFoundException",
    405: "MethodNotAllowedException",
    406: "UnsupportedOperationException",
}


def error_response(code: int, type_: str, message: str) -> JSONResponse:
    """The spec's ``IcebergErrorResponse``."""
    return JSONResponse(
        status_code=code, content={"error": {"message": message, "type": type_, "code": code}}
    )


@contextmanager
def client_input(what: str) -> Iterator[None]:
    """Parse client input inside this block: whatever it raises is a 400.

    pydantic wraps ``ValueError`` from validators but lets ``TypeError``
    through, and pyiceberg's model validators raise it for input they cannot
    read (a default value for an unknown field type). While parsing a request
    such an error is the client's, never the server's.
    """
    try:
        yield
    except (TypeError, ArithmeticError, LookupError, AttributeError) as exc:
        raise IcebergHTTPError(400, "BadRequestException", f"Invalid {what}: {exc}") from exc


def _validation_message(exc: RequestValidationError | pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        parts.append(f"{loc}: {err.get('msg')}" if loc else str(err.get("msg")))
    return "Malformed request: " + "; ".join(parts)


def to_error_response(exc: BaseException) -> JSONResponse:
    """Map any exception to the spec's status and error body."""
    if isinstance(exc, IcebergHTTPError):
        return error_response(exc.code, exc.type, exc.message)
    if isinstance(exc, StarletteHTTPException):
        return error_response(
            exc.status_code, _HTTP_TYPES.get(exc.status_code, "RESTException"), str(exc.detail)
        )
    if isinstance(exc, RequestValidationError | pydantic.ValidationError):
        return error_response(400, "BadRequestException", _validation_message(exc))
    for cls, code, type_ in _MAPPING:
        if isinstance(exc, cls):
            message = str(exc) or type_
            if isinstance(exc, KeyError):
                message = f"Missing or unknown key: {exc}"
            return error_response(code, type_, message)
    _log.exception("unexpected error in the REST catalog", exc_info=exc)
    return error_response(500, "InternalServerError", f"{type(exc).__name__}: {exc}")


class IcebergErrorRoute(APIRoute):
    """A route whose failures, request validation included, use the Iceberg error model."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:  # noqa: BLE001 - every failure becomes an error body
                return to_error_response(exc)

        return guarded
