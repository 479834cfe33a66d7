"""The JSON browse API over the platform catalog (``/api/v1/catalog/...``).

Namespaces in paths are dotted (``sales.eu``). Failures use the same error
body as the Iceberg REST catalog: ``{"error": {"message", "type", "code"}}``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel

from catalog import browse
from catalog.rest.errors import IcebergErrorRoute
from catalog.rest.identifiers import check_namespace, check_table_name
from catalog.rest.router import CatalogProvider

__all__ = ["create_browse_router"]


class _ErrorModel(BaseModel):
    message: str
    type: str
    code: int


class ErrorResponse(BaseModel):
    error: _ErrorModel


_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "Invalid identifier or parameter"},
    404: {"model": ErrorResponse, "description": "Unknown namespace or table"},
}


def _namespace(raw: str) -> tuple[str, ...]:
    return check_namespace(raw.split("."))


def _table(namespace: str, table: str) -> tuple[str, ...]:
    return (*_namespace(namespace), check_table_name(table))


def create_browse_router(catalog_provider: CatalogProvider) -> APIRouter:
    """Routes for browsing namespaces, tables, schemas, snapshots, files and rows."""
    router = APIRouter(
        prefix="/api/v1/catalog",
        tags=["Catalog browsing"],
        route_class=IcebergErrorRoute,
        responses=_ERRORS,
    )

    @router.get("/namespaces", summary="List namespaces (all levels)")
    def list_namespaces(
        parent: str | None = Query(default=None, description="Dotted parent namespace"),
    ) -> list[browse.NamespaceInfo]:
        parent_ns = _namespace(parent) if parent else ()
        return browse.list_namespaces(catalog_provider(), parent_ns)

    @router.get("/namespaces/{namespace}", summary="A namespace and its properties")
    def get_namespace(namespace: str) -> browse.NamespaceInfo:
        return browse.namespace_info(catalog_provider(), _namespace(namespace))

    @router.get("/namespaces/{namespace}/tables", summary="Tables of a namespace")
    def list_tables(namespace: str) -> list[browse.TableRef]:
        return browse.list_tables(catalog_provider(), _namespace(namespace))

    @router.get(
        "/tables/{namespace}/{table}",
        summary="Schema with field ids, partition spec, sort order and properties",
    )
    def describe_table(namespace: str, table: str) -> browse.TableDescription:
        return browse.describe_table(catalog_provider(), _table(namespace, table))

    @router.get("/tables/{namespace}/{table}/snapshots", summary="Snapshots with summaries")
    def snapshots(namespace: str, table: str) -> list[browse.SnapshotInfo]:
        return browse.snapshots(catalog_provider(), _table(namespace, table))

    @router.get("/tables/{namespace}/{table}/files", summary="Data and delete file statistics")
    def files(
        namespace: str,
        table: str,
        snapshot_id: int | None = Query(default=None, description="Default: current snapshot"),
    ) -> browse.FileStats:
        return browse.file_stats(catalog_provider(), _table(namespace, table), snapshot_id)

    @router.get("/tables/{namespace}/{table}/preview", summary="The first rows of the table")
    def preview(
        namespace: str,
        table: str,
        limit: int = Query(default=20, ge=1, le=browse.MAX_PREVIEW_ROWS),
    ) -> browse.Preview:
        return browse.preview_rows(catalog_provider(), _table(namespace, table), limit)

    return router
