"""Schema Registry errors, and the one place that maps them to Confluent error codes.

Every error carries the HTTP status and the Confluent ``error_code`` that the
reference Schema Registry answers with, so the HTTP layer only renders
``{"error_code": ..., "message": ...}``.
"""

from __future__ import annotations

from ingest.errors import TidelakeError

__all__ = [
    "SchemaRegistryError",
    "SubjectNotFound",
    "VersionNotFound",
    "SchemaNotFound",
    "SubjectSoftDeleted",
    "SubjectNotSoftDeleted",
    "VersionSoftDeleted",
    "VersionNotSoftDeleted",
    "SubjectCompatibilityNotConfigured",
    "SubjectModeNotConfigured",
    "IncompatibleSchema",
    "InvalidSchema",
    "InvalidVersion",
    "InvalidCompatibilityLevel",
    "InvalidMode",
    "OperationNotPermitted",
    "ReferenceExists",
    "IdDoesNotMatch",
    "InvalidSubject",
    "RequestTooLarge",
    "MalformedRequest",
    "UnprocessableEntity",
    "RouteNotFound",
    "StoreError",
]


class SchemaRegistryError(TidelakeError):
    """Base of the schema registry's errors: an HTTP status and a Confluent error code."""

    http_status: int = 500
    error_code: int = 50001
    default_message: str = "Error in the backend data store"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.default_message)
        self.message = message or self.default_message

    def to_json(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


def _error(name: str, status: int, code: int, message: str) -> type[SchemaRegistryError]:
    return type(
        name,
        (SchemaRegistryError,),
        {"http_status": status, "error_code": code, "default_message": message, "__doc__": message},
    )


# (class, HTTP status, Confluent error code, default message) -- the reference table.
SubjectNotFound = _error("SubjectNotFound", 404, 40401, "Subject not found.")
VersionNotFound = _error("VersionNotFound", 404, 40402, "Version not found.")
SchemaNotFound = _error("SchemaNotFound", 404, 40403, "Schema not found")
SubjectSoftDeleted = _error("SubjectSoftDeleted", 404, 40404, "Subject was soft deleted.")
SubjectNotSoftDeleted = _error(
    "SubjectNotSoftDeleted",
    404,
    40405,
    "Subject was not deleted first before being permanently deleted",
)
VersionSoftDeleted = _error("VersionSoftDeleted", 404, 40406, "Version was soft deleted.")
VersionNotSoftDeleted = _error(
    "VersionNotSoftDeleted",
    404,
    40407,
    "Version was not deleted first before being permanently deleted",
)
SubjectCompatibilityNotConfigured = _error(
    "SubjectCompatibilityNotConfigured",
    404,
    40408,
    "Subject does not have subject-level compatibility configured",
)
SubjectModeNotConfigured = _error(
    "SubjectModeNotConfigured", 404, 40409, "Subject does not have subject-level mode configured"
)
IncompatibleSchema = _error(
    "IncompatibleSchema", 409, 409, "Schema being registered is incompatible with an earlier schema"
)
InvalidSchema = _error("InvalidSchema", 422, 42201, "Invalid schema")
InvalidVersion = _error(
    "InvalidVersion", 422, 42202, "The specified version is not a valid version id"
)
InvalidCompatibilityLevel = _error(
    "InvalidCompatibilityLevel", 422, 42203, "Invalid compatibility level"
)
InvalidMode = _error("InvalidMode", 422, 42204, "Invalid mode")
OperationNotPermitted = _error("OperationNotPermitted", 422, 42205, "Operation not permitted")
ReferenceExists = _error(
    "ReferenceExists", 422, 42206, "One or more references exist to the schema"
)
IdDoesNotMatch = _error("IdDoesNotMatch", 422, 42207, "Schema id does not match")
InvalidSubject = _error("InvalidSubject", 422, 42208, "Invalid subject")
RequestTooLarge = _error("RequestTooLarge", 413, 413, "Request body too large")
MalformedRequest = _error("MalformedRequest", 400, 400, "Malformed request body")
# A well-formed JSON body whose field has the wrong type (Confluent: Jackson mapping error).
UnprocessableEntity = _error("UnprocessableEntity", 422, 422, "Unprocessable entity")
RouteNotFound = _error("RouteNotFound", 404, 404, "HTTP 404 Not Found")
StoreError = _error("StoreError", 500, 50001, "Error in the backend data store")
