"""The Iceberg REST catalog service, per the Apache Iceberg REST OpenAPI spec.

:func:`create_rest_router` returns a FastAPI router with the ``/v1/...`` routes
(no prefix) backed by any pyiceberg catalog. Handlers are plain ``def``
functions: FastAPI runs them in its thread pool, so blocking pyiceberg calls
never run on the event loop.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable
from typing import Annotated, Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Body, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import CreateTableRequest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.io import load_file_io
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

from catalog.repoint import repoint_sql_table
from catalog.rest.auth import RestAuth
from catalog.rest.commits import (
    commit_table_change,
    commit_transaction,
    parse_table_change,
    supports_multi_table_commits,
)
from catalog.rest.errors import IcebergErrorRoute, IcebergHTTPError, client_input
from catalog.rest.idempotency import (
    IDEMPOTENCY_KEY_LIFETIME,
    IdempotencyStore,
    idempotent_route_class,
)
from catalog.rest.identifiers import (
    check_namespace,
    check_table_name,
    decode_namespace,
    double_encodes_parent,
    paginate,
    path_names,
)
from catalog.rest.permissions import CatalogAccess, NamespaceGrants
from catalog.rest.purge import drop_table as drop_table_files

__all__ = ["CatalogProvider", "RestAuth", "create_rest_router"]

_log = logging.getLogger(__name__)

CatalogProvider = Callable[[], Catalog]
JsonBody = Annotated[dict[str, Any], Body()]


def _path_names(request: Request) -> dict[str, str]:
    route = request.scope.get("route")
    template = getattr(route, "path", "")
    raw = request.scope.get("raw_path") or request.url.path.encode()
    return path_names(template, raw, request.path_params)


# Namespace and table names from the raw path, decoded as Iceberg clients encode them.
PathNames = Annotated[dict[str, str], Depends(_path_names)]

ENDPOINTS = (
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/transactions/commit",
)
# Advertised only over catalogs that can commit several tables atomically.
_TRANSACTIONS = "POST /v1/{prefix}/transactions/commit"

# FileIO settings a client needs to read and write the warehouse itself.
_CLIENT_CONFIG_PREFIXES = ("s3.", "client.", "gcs.", "adls.", "py-io-impl")


class _NamespaceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    namespace: list[Any]
    properties: dict[str, str] = Field(default_factory=dict)


class _PropertiesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    removals: list[str] = Field(default_factory=list)
    updates: dict[str, str] = Field(default_factory=dict)


class _TableIdentifier(BaseModel):
    namespace: list[Any]
    name: Any


class _RenameRequest(BaseModel):
    source: _TableIdentifier
    destination: _TableIdentifier


class _RegisterRequest(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    name: Any
    metadata_location: str = Field(alias="metadata-location", min_length=1)
    overwrite: bool = False


class _TransactionRequest(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    table_changes: list[dict[str, Any]] = Field(alias="table-changes")


class _MetricsRequest(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="allow")
    report_type: str = Field(alias="report-type")


_TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"


def _oauth_error(status: int, error: str, description: str) -> JSONResponse:
    """The spec's ``OAuthError`` body (RFC 6749 section 5.2)."""
    return JSONResponse(
        status_code=status, content={"error": error, "error_description": description}
    )


def _json(payload: str, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        content=payload, status_code=status_code, media_type="application/json", headers=headers
    )


def _ident(ident: Iterable[str]) -> tuple[str, ...]:
    return tuple(ident)


def _table_result(
    metadata: TableMetadata, metadata_location: str | None, config: dict[str, str]
) -> str:
    location = json.dumps(metadata_location)
    return (
        f'{{"metadata-location": {location}, "metadata": {metadata.model_dump_json()}, '
        f'"config": {json.dumps(config)}}}'
    )


def _refs_only(metadata: TableMetadata) -> TableMetadata:
    referenced = {ref.snapshot_id for ref in metadata.refs.values()}
    snapshots = [s for s in metadata.snapshots if s.snapshot_id in referenced]
    return metadata.model_copy(update={"snapshots": snapshots})


def _etag(metadata_location: str, mode: str) -> str:
    return '"' + hashlib.sha256(f"{metadata_location}|{mode}".encode()).hexdigest()[:32] + '"'


def _check_metadata_file(catalog: Catalog, location: str) -> None:
    """Refuse to register a table whose metadata file cannot be read."""
    try:
        io = load_file_io(dict(catalog.properties), location)
        FromInputFile.table_metadata(io.new_input(location))
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the client's problem
        raise IcebergHTTPError(
            400, "BadRequestException", f"Cannot read table metadata at {location}: {exc}"
        ) from exc


async def _needed_access(request: Request) -> tuple[CatalogAccess, tuple[str, ...] | None]:
    """What a catalog request needs: read or write, on which namespace (None:
    none in particular; a write on None needs a grant over every namespace)."""
    method = request.method.upper()
    path = request.url.path
    write = CatalogAccess.WRITE
    access = CatalogAccess.READ if method in ("GET", "HEAD") else write
    if path.endswith("/metrics") and method == "POST":
        access = CatalogAccess.READ  # a scan report after a read
    raw = request.path_params.get("namespace")
    try:
        if isinstance(raw, str) and raw:
            return access, decode_namespace(raw)
        if method == "POST" and path.rstrip("/").endswith("/namespaces"):
            body = json.loads(await request.body() or b"{}")
            levels = body.get("namespace") if isinstance(body, dict) else None
            return write, check_namespace(levels if isinstance(levels, list) else [])
        parent = request.query_params.get("parent")
        if method == "GET" and parent:
            return access, decode_namespace(
                parent, levels_quoted=double_encodes_parent(request.headers.get("user-agent"))
            )
    except (ValueError, IcebergHTTPError):
        pass  # a malformed name: checked on every namespace, refused unless granted all
    return access, None


def create_rest_router(
    catalog_provider: CatalogProvider,
    *,
    auth: RestAuth | None = None,
    warehouse: str | None = None,
    permissions: NamespaceGrants | None = None,
) -> APIRouter:
    """The Iceberg REST catalog routes (``/v1/...``) over ``catalog_provider()``."""
    guard = auth or RestAuth()
    grants = permissions or NamespaceGrants()

    async def authorize(request: Request, authorization: str | None = Header(default=None)) -> None:
        caller = guard.caller(authorization)
        if caller is None:
            raise IcebergHTTPError(
                401, "NotAuthorizedException", "Not authorized to make this request"
            )
        client = caller[0]
        if client is None or not grants.enforced:
            return
        access, namespace = await _needed_access(request)
        if not grants.allows(client, access, namespace):
            where = ".".join(namespace) if namespace is not None else "every namespace"
            raise IcebergHTTPError(
                403,
                "ForbiddenException",
                f"Client {client} may not {access.name.lower()} {where}",
            )

    router = APIRouter(route_class=IcebergErrorRoute, tags=["Iceberg REST catalog"])
    secured = APIRouter(
        route_class=idempotent_route_class(IdempotencyStore()),
        dependencies=[Depends(authorize)],
    )

    def client_config(catalog: Catalog) -> dict[str, str]:
        return {
            k: v
            for k, v in catalog.properties.items()
            if isinstance(v, str) and k.startswith(_CLIENT_CONFIG_PREFIXES)
        }

    @router.post("/v1/oauth/tokens", include_in_schema=False)
    async def get_token(request: Request) -> Response:
        form = {
            k: v[0] for k, v in parse_qs((await request.body()).decode(errors="replace")).items()
        }
        grant = form.get("grant_type")
        if grant == "client_credentials":
            issued = guard.issue(form.get("client_id", ""), form.get("client_secret", ""))
            if issued is None:
                return _oauth_error(401, "invalid_client", "Unknown client or wrong secret")
        elif grant == _TOKEN_EXCHANGE:
            issued = guard.refresh(form.get("subject_token", ""))
            if issued is None:
                return _oauth_error(400, "invalid_grant", "The subject token is invalid or expired")
        else:
            return _oauth_error(
                400,
                "unsupported_grant_type",
                "Only client_credentials and token exchange (refresh) are supported",
            )
        return JSONResponse(
            {
                "access_token": issued.token,
                "token_type": "bearer",
                "expires_in": issued.expires_in,
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
            }
        )

    @secured.get("/v1/config")
    def get_config(
        warehouse_param: str | None = Query(default=None, alias="warehouse"),
    ) -> Response:
        catalog = catalog_provider()
        served = warehouse or catalog.properties.get("warehouse")
        if warehouse_param and warehouse_param not in {served, catalog.name}:
            raise IcebergHTTPError(
                404, "NoSuchWarehouseException", f"Warehouse {warehouse_param} does not exist"
            )
        overrides = {"warehouse": served} if served else {}
        return JSONResponse(
            {
                "defaults": {},
                "overrides": overrides,
                "endpoints": [
                    e
                    for e in ENDPOINTS
                    if e != _TRANSACTIONS or supports_multi_table_commits(catalog)
                ],
                "idempotency-key-lifetime": IDEMPOTENCY_KEY_LIFETIME,
            }
        )

    # -- namespaces ---------------------------------------------------------

    @secured.get("/v1/namespaces")
    def list_namespaces(
        parent: str | None = None,
        page_token: str | None = Query(default=None, alias="pageToken"),
        page_size: int | None = Query(default=None, alias="pageSize"),
        user_agent: str | None = Header(default=None),
    ) -> Response:
        catalog = catalog_provider()
        parent_ns: tuple[str, ...] = (
            decode_namespace(parent, levels_quoted=double_encodes_parent(user_agent))
            if parent
            else ()
        )
        if parent_ns and not catalog.namespace_exists(parent_ns):
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(parent_ns)}")
        names = [_ident(n) for n in catalog.list_namespaces(parent_ns)]
        page = paginate(names, page_token, page_size)
        return JSONResponse(
            {"namespaces": [list(n) for n in page.items], "next-page-token": page.next_token}
        )

    @secured.post("/v1/namespaces")
    def create_namespace(payload: JsonBody) -> Response:
        request = _NamespaceRequest.model_validate(payload)
        namespace = check_namespace(request.namespace)
        catalog = catalog_provider()
        catalog.create_namespace(namespace, request.properties)
        return JSONResponse({"namespace": list(namespace), "properties": request.properties})

    @secured.get("/v1/namespaces/{namespace}")
    def load_namespace(names: PathNames, namespace: str) -> Response:
        ns = decode_namespace(names["namespace"])
        props = catalog_provider().load_namespace_properties(ns)
        return JSONResponse({"namespace": list(ns), "properties": dict(props)})

    @secured.head("/v1/namespaces/{namespace}", status_code=204)
    def namespace_exists(names: PathNames, namespace: str) -> Response:
        ns = decode_namespace(names["namespace"])
        if not catalog_provider().namespace_exists(ns):
            raise IcebergHTTPError(
                404, "NoSuchNamespaceException", f"Namespace does not exist: {'.'.join(ns)}"
            )
        return Response(status_code=204)

    @secured.delete("/v1/namespaces/{namespace}", status_code=204)
    def drop_namespace(names: PathNames, namespace: str) -> Response:
        ns = decode_namespace(names["namespace"])
        catalog = catalog_provider()
        children = [tuple(c) for c in catalog.list_namespaces(ns)]
        if any(len(c) > len(ns) for c in children):
            raise NamespaceNotEmptyError(f"Namespace {'.'.join(ns)} has child namespaces")
        catalog.drop_namespace(ns)
        return Response(status_code=204)

    @secured.post("/v1/namespaces/{namespace}/properties")
    def update_namespace_properties(
        names: PathNames, namespace: str, payload: JsonBody
    ) -> Response:
        ns = decode_namespace(names["namespace"])
        request = _PropertiesRequest.model_validate(payload)
        overlap = set(request.removals) & set(request.updates)
        if overlap:
            raise IcebergHTTPError(
                422,
                "UnprocessableEntityException",
                f"Properties are both updated and removed: {', '.join(sorted(overlap))}",
            )
        summary = catalog_provider().update_namespace_properties(
            ns, set(request.removals), request.updates
        )
        return JSONResponse(
            {"updated": summary.updated, "removed": summary.removed, "missing": summary.missing}
        )

    # -- tables -------------------------------------------------------------

    @secured.get("/v1/namespaces/{namespace}/tables")
    def list_tables(
        names: PathNames,
        namespace: str,
        page_token: str | None = Query(default=None, alias="pageToken"),
        page_size: int | None = Query(default=None, alias="pageSize"),
    ) -> Response:
        ns = decode_namespace(names["namespace"])
        catalog = catalog_provider()
        tables = [_ident(t) for t in catalog.list_tables(ns)]
        if not tables and not catalog.namespace_exists(ns):
            # Some catalogs (Hive) list an unknown namespace as empty.
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(ns)}")
        page = paginate(tables, page_token, page_size)
        return JSONResponse(
            {
                "identifiers": [{"namespace": list(t[:-1]), "name": t[-1]} for t in page.items],
                "next-page-token": page.next_token,
            }
        )

    @secured.post("/v1/namespaces/{namespace}/tables")
    def create_table(names: PathNames, namespace: str, payload: JsonBody) -> Response:
        ns = decode_namespace(names["namespace"])
        with client_input("CreateTableRequest"):
            request = CreateTableRequest.model_validate(
                {"location": None, "partition-spec": None, "write-order": None, **payload}
            )
        identifier = (*ns, check_table_name(request.name))
        catalog = catalog_provider()
        spec = request.partition_spec or UNPARTITIONED_PARTITION_SPEC
        order = request.write_order or UNSORTED_SORT_ORDER
        if request.stage_create:
            if not catalog.namespace_exists(ns):
                raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(ns)}")
            if catalog.table_exists(identifier):
                raise TableAlreadyExistsError(f"Table already exists: {'.'.join(identifier)}")
            txn = catalog.create_table_transaction(
                identifier,
                request.table_schema,
                location=request.location,
                partition_spec=spec,
                sort_order=order,
                properties=request.properties,
            )
            staged: Table = txn._table  # noqa: SLF001 - the staged metadata, not yet committed
            return _json(_table_result(staged.metadata, None, client_config(catalog)))
        table = catalog.create_table(
            identifier,
            request.table_schema,
            location=request.location,
            partition_spec=spec,
            sort_order=order,
            properties=request.properties,
        )
        return _json(_table_result(table.metadata, table.metadata_location, client_config(catalog)))

    @secured.post("/v1/namespaces/{namespace}/register")
    def register_table(names: PathNames, namespace: str, payload: JsonBody) -> Response:
        ns = decode_namespace(names["namespace"])
        request = _RegisterRequest.model_validate(payload)
        identifier = (*ns, check_table_name(request.name))
        catalog = catalog_provider()
        _check_metadata_file(catalog, request.metadata_location)
        if request.overwrite and isinstance(catalog, SqlCatalog):
            # pyiceberg's SQL catalog refuses overwrite; move the pointer in place
            # (never drop and register: a reader would find no table meanwhile).
            try:
                repoint_sql_table(catalog, identifier, request.metadata_location)
                table = catalog.load_table(identifier)
            except NoSuchTableError:
                table = catalog.register_table(identifier, request.metadata_location)
        else:
            table = catalog.register_table(
                identifier, request.metadata_location, overwrite=request.overwrite
            )
        return _json(_table_result(table.metadata, table.metadata_location, client_config(catalog)))

    @secured.get("/v1/namespaces/{namespace}/tables/{table}")
    def load_table(
        names: PathNames,
        namespace: str,
        table: str,
        snapshots: str = Query(default="all", pattern="^(all|refs)$"),
        if_none_match: str | None = Header(default=None),
    ) -> Response:
        identifier = (*decode_namespace(names["namespace"]), check_table_name(names["table"]))
        catalog = catalog_provider()
        loaded = catalog.load_table(identifier)
        etag = _etag(loaded.metadata_location, snapshots)
        if if_none_match and etag in {t.strip() for t in if_none_match.split(",")}:
            return Response(status_code=304, headers={"ETag": etag})
        metadata = loaded.metadata if snapshots == "all" else _refs_only(loaded.metadata)
        return _json(
            _table_result(metadata, loaded.metadata_location, client_config(catalog)),
            headers={"ETag": etag},
        )

    @secured.head("/v1/namespaces/{namespace}/tables/{table}", status_code=204)
    def table_exists(names: PathNames, namespace: str, table: str) -> Response:
        identifier = (*decode_namespace(names["namespace"]), check_table_name(names["table"]))
        if not catalog_provider().table_exists(identifier):
            raise NoSuchTableError(f"Table does not exist: {'.'.join(identifier)}")
        return Response(status_code=204)

    @secured.post("/v1/namespaces/{namespace}/tables/{table}")
    def update_table(names: PathNames, namespace: str, table: str, payload: JsonBody) -> Response:
        identifier = (*decode_namespace(names["namespace"]), check_table_name(names["table"]))
        change = parse_table_change(payload)
        response = commit_table_change(catalog_provider(), identifier, change)
        location = json.dumps(response.metadata_location)
        return _json(
            f'{{"metadata-location": {location}, "metadata": {response.metadata.model_dump_json()}}}'
        )

    @secured.delete("/v1/namespaces/{namespace}/tables/{table}", status_code=204)
    def drop_table(
        names: PathNames,
        namespace: str,
        table: str,
        purge_requested: bool = Query(default=False, alias="purgeRequested"),
    ) -> Response:
        identifier = (*decode_namespace(names["namespace"]), check_table_name(names["table"]))
        drop_table_files(catalog_provider(), identifier, purge=purge_requested)
        return Response(status_code=204)

    @secured.post("/v1/namespaces/{namespace}/tables/{table}/metrics", status_code=204)
    def report_metrics(names: PathNames, namespace: str, table: str, payload: JsonBody) -> Response:
        identifier = (*decode_namespace(names["namespace"]), check_table_name(names["table"]))
        report = _MetricsRequest.model_validate(payload)
        if not catalog_provider().table_exists(identifier):
            raise NoSuchTableError(f"Table does not exist: {'.'.join(identifier)}")
        _log.debug("metrics report %s for %s", report.report_type, ".".join(identifier))
        return Response(status_code=204)

    @secured.post("/v1/tables/rename", status_code=204)
    def rename_table(payload: JsonBody) -> Response:
        request = _RenameRequest.model_validate(payload)
        source = (*check_namespace(request.source.namespace), check_table_name(request.source.name))
        target = (
            *check_namespace(request.destination.namespace),
            check_table_name(request.destination.name),
        )
        catalog = catalog_provider()
        if not catalog.table_exists(source):
            raise NoSuchTableError(f"Table does not exist: {'.'.join(source)}")
        catalog.rename_table(source, target)
        return Response(status_code=204)

    @secured.post("/v1/transactions/commit", status_code=204)
    def commit_multi(payload: JsonBody) -> Response:
        request = _TransactionRequest.model_validate(payload)
        changes = [parse_table_change(c) for c in request.table_changes]
        commit_transaction(catalog_provider(), changes)
        return Response(status_code=204)

    router.include_router(secured)
    return router
