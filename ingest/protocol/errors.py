"""Kafka error codes as exceptions: one class per code, looked up by code.

The classes are derived from kio's ``ErrorCode`` table (Kafka's own list, with
its retriable flags), so every code Kafka defines has a class here.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ingest.errors import TidelakeError

__all__ = ["ErrorCode", "KafkaError", "ProtocolError", "error_class", "raise_for"]


class KafkaError(TidelakeError):
    """An error a Kafka broker reports with an error code."""

    error_code: ErrorCode = ErrorCode.unknown_server_error

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.error_code.name)
        self.message = message

    @property
    def code(self) -> int:
        return int(self.error_code)

    @property
    def retriable(self) -> bool:
        return bool(self.error_code.retriable)


class ProtocolError(KafkaError):
    """A frame that cannot be parsed; the connection is closed."""

    error_code = ErrorCode.invalid_request


def _class_name(code: ErrorCode) -> str:
    return "".join(part.capitalize() for part in code.name.split("_")) + "Error"


_BY_CODE: dict[int, type[KafkaError]] = {
    int(code): type(_class_name(code), (KafkaError,), {"error_code": code, "__module__": __name__})
    for code in ErrorCode
}


def error_class(code: int | ErrorCode) -> type[KafkaError]:
    """The exception class for a Kafka error code."""
    return _BY_CODE.get(int(code), _BY_CODE[-1])


def raise_for(code: int | ErrorCode, message: str | None = None) -> None:
    """Raise the exception for ``code`` unless it is 0 (no error)."""
    if int(code) != 0:
        raise error_class(code)(message)
