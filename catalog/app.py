"""The catalog's HTTP application: Iceberg REST catalog, browse API and web page.

``create_app(settings)`` builds a FastAPI app with
- the Iceberg REST catalog at ``/v1/...``,
- the JSON browse API at ``/api/v1/catalog/...`` (documented in ``/openapi.json``),
- a small browser page at ``/ui``.
The process assembly in ``api/`` mounts this app on its HTTP listener.
"""

from __future__ import annotations

import threading

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import Response
from pyiceberg.catalog import Catalog
from starlette.exceptions import HTTPException as StarletteHTTPException

from catalog.browse_api import create_browse_router
from catalog.config import CatalogSettings
from catalog.factory import load_platform_catalog
from catalog.rest.auth import RestAuth
from catalog.rest.errors import to_error_response
from catalog.rest.permissions import NamespaceGrants
from catalog.rest.router import CatalogProvider, create_rest_router
from catalog.ui import create_ui_router

__all__ = ["create_app", "lazy_catalog_provider"]

_CATALOG_PREFIXES = ("/v1/", "/api/v1/catalog/")


def lazy_catalog_provider(settings: CatalogSettings) -> CatalogProvider:
    """A provider that opens the platform catalog on first use and then reuses it."""
    lock = threading.Lock()
    holder: list[Catalog] = []

    def provide() -> Catalog:
        if not holder:
            with lock:
                if not holder:
                    holder.append(load_platform_catalog(settings))
        return holder[0]

    return provide


def create_app(
    settings: CatalogSettings | None = None, *, catalog: Catalog | None = None
) -> FastAPI:
    """The catalog app over ``catalog`` or, if none is given, the one ``settings`` name."""
    settings = settings or CatalogSettings()
    if catalog is not None:
        fixed = catalog

        def provider() -> Catalog:
            return fixed

    else:
        provider = lazy_catalog_provider(settings)

    app = FastAPI(
        title="Tidelake catalog",
        description="Iceberg REST catalog (/v1), catalog browsing API (/api/v1/catalog) and UI (/ui).",
        version="0.1.0",
    )
    secret = settings.serve_token_secret
    auth = RestAuth(
        settings.serve_tokens,
        settings.serve_oauth2_clients,
        token_lifetime_s=settings.serve_token_lifetime_seconds,
        secret=secret.get_secret_value() if secret is not None else None,
    )
    grants = NamespaceGrants(settings.serve_oauth2_permissions)
    app.include_router(create_rest_router(provider, auth=auth, permissions=grants))
    app.state.rest_auth = auth
    app.state.catalog_provider = provider

    app.include_router(create_browse_router(provider))
    app.include_router(create_ui_router())

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        # Unmatched paths under the catalog's prefixes get the Iceberg error body;
        # everything else (routes others add to this app) keeps FastAPI's default.
        if request.url.path.startswith(_CATALOG_PREFIXES):
            return to_error_response(exc)
        return await http_exception_handler(request, exc)

    return app
