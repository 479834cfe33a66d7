"""Mount the console on the platform's FastAPI app."""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, HTTPException
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from api.cluster_reads import cluster_reads
from api.console.history import HistorySampler
from api.console.routes import create_console_api

if TYPE_CHECKING:
    from ingest.broker import Broker

__all__ = ["mount_console"]

_STATIC = {
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}


def _ui_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)
    static = files("api.console").joinpath("static")
    page = static.joinpath("index.html").read_text(encoding="utf-8")
    assets = {name: static.joinpath(name).read_bytes() for name in _STATIC}
    # the catalog room's table browser, one level down (its API paths are relative)
    catalog_page = (
        files("catalog")
        .joinpath("static/index.html")
        .read_text(encoding="utf-8")
        .replace('"../api/v1/', '"../../api/v1/')
    )

    @router.get("/ui")
    def ui_redirect() -> RedirectResponse:
        return RedirectResponse("ui/")

    @router.get("/ui/", response_class=HTMLResponse)
    def ui_page() -> HTMLResponse:
        return HTMLResponse(page)

    @router.get("/ui/static/{name}")
    def ui_static(name: str) -> Response:
        if name not in assets:
            raise HTTPException(404, "no such file")
        return Response(assets[name], media_type=_STATIC[name])

    @router.get("/ui/catalog/", response_class=HTMLResponse)
    def catalog_browser() -> HTMLResponse:
        return HTMLResponse(catalog_page)

    return router


def _paths(route: Any) -> set[str]:
    """The paths a route serves; an included router (FastAPI keeps it whole) serves its routes'."""
    included = getattr(route, "original_router", None)
    if included is not None:
        return {p for r in included.routes for p in _paths(r)}
    return {str(getattr(route, "path", ""))}


def _serves_ui(route: Any) -> bool:
    return _paths(route) <= {"/ui", "/ui/"}


def mount_console(
    app: FastAPI,
    broker: Broker,
    table_status: Callable[[], list[dict[str, Any]]] | None,
    registry: Any | None,
    history_interval_s: float = 5.0,
    history_samples: int = 720,
) -> HistorySampler:
    """Replace the catalog page at ``/ui`` with the console and add its JSON
    endpoints; the history sampler runs while the app runs."""
    app.router.routes[:] = [route for route in app.router.routes if not _serves_ui(route)]
    reads = cluster_reads(broker)
    history = HistorySampler(
        broker, reads, table_status, interval_s=history_interval_s, keep=history_samples
    )
    app.include_router(create_console_api(broker, reads, table_status, registry, history))
    app.include_router(_ui_router())

    async def start() -> None:
        history.start()

    app.router.on_startup.append(start)
    app.router.on_shutdown.append(history.stop)
    return history
