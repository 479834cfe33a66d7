"""A small catalog browser page at ``/ui``: plain HTML and JavaScript over the browse API."""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, RedirectResponse

__all__ = ["create_ui_router"]


def create_ui_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)
    page = files("catalog").joinpath("static/index.html").read_text(encoding="utf-8")

    @router.get("/ui")
    def ui_redirect() -> RedirectResponse:
        return RedirectResponse("ui/")

    @router.get("/ui/", response_class=HTMLResponse)
    def ui_page() -> HTMLResponse:
        return HTMLResponse(page)

    return router
