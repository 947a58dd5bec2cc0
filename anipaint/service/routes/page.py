"""The page at ``/`` and the interactive API docs at ``/docs`` (Swagger UI's files from fastapi-offline, so no
CDN is needed)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, Response

STATIC = Path(__file__).resolve().parent.parent / "static"

router = APIRouter(include_in_schema=False)


@router.get("/")
async def index() -> FileResponse:
    return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


@router.get("/favicon.ico")
async def favicon() -> FileResponse:
    return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")


@router.get("/docs")
async def docs(request: Request) -> Response:
    return get_swagger_ui_html(
        openapi_url=request.app.openapi_url or "/openapi.json",
        title="anipaint API",
        swagger_js_url="/docs-assets/swagger-ui-bundle.js",
        swagger_css_url="/docs-assets/swagger-ui.css",
        swagger_favicon_url="/docs-assets/favicon.png",
    )


def docs_assets() -> Path:
    import fastapi_offline

    return Path(fastapi_offline.__file__).parent / "static"
