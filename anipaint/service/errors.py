"""Every error answer is ``{"detail": "<a sentence>"}`` with the right status, and never names a server path."""

from __future__ import annotations

import logging
import re

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from anipaint.options import MAX_SIDE_RANGE, options
from anipaint.service.queue.jobs import failure

log = logging.getLogger("anipaint.service")
_STYLE_FIELDS = {option.name for option in options() if option.kind == "style"}
_REJECT_REASON = {413: "too_large", 415: "not_image", 429: "rate_limited", 503: "busy", 504: "timeout"}


def install(app: FastAPI) -> None:
    metrics = app.state.metrics

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        reason = _REJECT_REASON.get(exc.status_code, "bad_request" if 400 <= exc.status_code < 500 else None)
        if reason and exc.status_code not in (404, 405, 409):
            metrics.reject(reason)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(app, request))
        return JSONResponse({"detail": str(exc.detail)}, exc.status_code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        metrics.reject("bad_request")
        problems, status = [], 422
        for err in exc.errors():
            field = str(err.get("loc", ("", "?"))[-1])
            if field == "image" and err.get("type") == "missing":
                problems.append("no picture: send the photo in the multipart form field 'image'")
            elif field == "max_side" or (len(err.get("loc", ())) > 1 and err["loc"][1] == "max_side"):
                low, high = MAX_SIDE_RANGE
                problems.append(f"max_side must be {low}–{high} pixels, or 0 / 'original' for full resolution")
            elif field in _STYLE_FIELDS:
                status = 400
                named = "" if field == "style" else f" for {field}"
                problems.append(f"unknown style {err.get('input')!r}{named}; see /api/styles")
            else:
                problems.append(f"{field}: {err.get('msg', 'invalid value')}")
        return JSONResponse({"detail": "; ".join(dict.fromkeys(problems)) or "invalid request"}, status)

    @app.exception_handler(OSError)
    async def storage_error(_: Request, exc: OSError) -> JSONResponse:
        reason, kind = failure(exc, "admission")
        status = 507 if kind == "disk" else 503
        metrics.reject("no_room" if kind == "disk" else "busy")
        return JSONResponse({"detail": reason}, status, headers={"Retry-After": "30"})

    @app.exception_handler(Exception)
    async def internal_error(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return JSONResponse({"detail": f"internal error: {type(exc).__name__}"}, 500)


def allowed_methods(app: FastAPI, request: Request) -> list[str]:
    """Every method the API serves at this path, from the OpenAPI document (Starlette's 405 names only the first
    matching route's methods)."""
    methods: set[str] = set()
    for template, operations in app.openapi()["paths"].items():
        if re.fullmatch(re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(template)), request.url.path):
            methods |= {m.upper() for m in operations}
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)
