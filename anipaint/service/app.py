"""The web service: the page at ``/`` and a small HTTP API over the painter, all through one bounded queue.

Handlers stay thin: uploads are size-checked (:mod:`.uploads`), headers probed by :mod:`anipaint.imaging`,
styles resolved by :mod:`anipaint.store`, and every picture is painted by a worker of the job queue
(:mod:`.jobs`), whether it came through ``/predict`` or ``/api/jobs``.
"""

import asyncio
import base64
import logging
import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated

from fastapi import Depends, FastAPI, File, Form, HTTPException, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from anipaint import __version__, imaging, store
from anipaint.errors import ImageError, ImageTooLargeError, LicenceError, StyleError
from anipaint.service.jobs import (
    JobInfo,
    JobNotDoneError,
    JobQueue,
    JobRequest,
    LocalJobQueue,
    QueueFullError,
    UnknownJobError,
)
from anipaint.service.metrics import ServiceMetrics
from anipaint.service.models import ConfigOut, JobOut, PredictOut, StyleOut
from anipaint.service.readiness import Readiness
from anipaint.service.thumbnails import Thumbnails
from anipaint.service.uploads import FORM_SLACK, BodyLimit, parse_max_side, read_upload
from anipaint.settings import Settings, get_settings

log = logging.getLogger("anipaint.service")
STATIC = Path(__file__).resolve().parent / "static"
_KIND_STATUS = {"image": 415, "style": 400, "busy": 503}
_REJECT_REASON = {413: "too_large", 415: "not_image", 503: "busy", 504: "timeout"}


def create_app(settings: Settings | None = None, queue: JobQueue | None = None) -> FastAPI:
    """The FastAPI app. ``queue`` defaults to a :class:`LocalJobQueue` with ``settings.jobs`` painters, or to
    Celery workers when ``settings.broker_url`` is set (then this process paints nothing itself)."""
    s = settings if settings is not None else get_settings()
    metrics = ServiceMetrics()
    jobs: JobQueue = queue if queue is not None else _default_queue(s, metrics)
    metrics.watch(jobs)
    readiness = Readiness(s, warm=isinstance(jobs, LocalJobQueue))
    thumbs = Thumbnails(s)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        jobs.start()
        readiness.start()
        yield
        await asyncio.to_thread(jobs.stop)

    app = FastAPI(
        title="anipaint",
        version=__version__,
        summary="Photos in, anime-style pictures out.",
        description="Paint a photo in an AnimeGAN style. `/predict` answers in one request; `/api/jobs` "
        "queues a picture and reports its progress. Both share one bounded queue: when it is full the "
        "answer is 503 with a Retry-After header.",
        lifespan=lifespan,
        docs_url=None,  # served below from swagger-ui-bundle: FastAPI's default page loads Swagger from a CDN
    )
    app.state.settings, app.state.jobs, app.state.metrics = s, jobs, metrics
    app.add_middleware(
        BodyLimit,
        max_body=s.max_upload_bytes + FORM_SLACK,
        upload_limit=s.max_upload_bytes,
        on_reject=lambda: metrics.reject("too_large"),
    )

    # -- errors: always {"detail": "<a sentence>"} -------------------------------------------------------------
    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        reason = _REJECT_REASON.get(exc.status_code, "bad_request" if 400 <= exc.status_code < 500 else None)
        if reason and exc.status_code not in (404, 405, 409):
            metrics.reject(reason)
        return JSONResponse({"detail": str(exc.detail)}, exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        metrics.reject("bad_request")
        problems = []
        for err in exc.errors():
            field = str(err.get("loc", ("", "?"))[-1])
            if field == "image" and err.get("type") == "missing":
                problems.append("no picture: send the photo in the multipart form field 'image'")
            else:
                problems.append(f"{field}: {err.get('msg', 'invalid value')}")
        return JSONResponse({"detail": "; ".join(problems) or "invalid request"}, 422)

    @app.exception_handler(Exception)
    async def internal_error(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return JSONResponse({"detail": f"internal error: {type(exc).__name__}"}, 500)

    # -- shared request parsing --------------------------------------------------------------------------------
    async def paint_request(
        image: Annotated[UploadFile, File(description="The photo (JPEG, PNG, WebP, ...).")],
        style: Annotated[str | None, Form(description="Style id or alias; default: the server's.")] = None,
        faces: Annotated[bool | None, Form(description="Restyle faces at their own resolution.")] = None,
        max_side: Annotated[
            str | None, Form(description="Long-side cap in pixels; 0 or 'original' = full resolution.")
        ] = None,
        strength: Annotated[
            float, Form(ge=0.0, le=1.0, description="How much of the style: 0 = the photo, 1 = the full style.")
        ] = 1.0,
    ) -> JobRequest:
        cap = parse_max_side(max_side, s.max_side)
        try:
            chosen = store.resolve(style or None, s)
        except LicenceError as exc:
            raise HTTPException(403, str(exc)) from None
        except StyleError as exc:
            raise HTTPException(400, str(exc)) from None
        data = await read_upload(image, s.max_upload_bytes)
        if not data:
            raise HTTPException(415, "the upload is empty; choose a photo")
        try:
            width, height, _ = imaging.probe_image(data)
            imaging.check_limits(width, height, s.max_pixels)
        except ImageTooLargeError as exc:
            raise HTTPException(413, str(exc)) from None
        except ImageError as exc:
            raise HTTPException(415, str(exc)) from None
        name = Path(image.filename or "image").stem[:80] or "image"
        return JobRequest(data=data, style=chosen.id, faces=faces, max_side=cap, name=name, strength=strength)

    def submit(request: JobRequest) -> JobInfo:
        try:
            return jobs.submit(request)
        except QueueFullError as exc:
            raise HTTPException(
                503,
                f"the painter is busy: {exc}; try again in {exc.retry_after} s",
                headers={"Retry-After": str(exc.retry_after)},
            ) from None

    def forget(job_id: str) -> None:
        try:
            jobs.cancel(job_id)
        except UnknownJobError:
            pass

    def lookup(job_id: str) -> JobInfo:
        try:
            return jobs.get(job_id)
        except UnknownJobError:
            raise HTTPException(404, "no such job (unknown, expired or deleted)") from None

    # -- painting ----------------------------------------------------------------------------------------------
    @app.post("/predict", response_model=PredictOut, tags=["paint"], summary="Paint a photo and wait")
    async def predict(request: Request, job: Annotated[JobRequest, Depends(paint_request)]) -> PredictOut:
        info = submit(job)
        deadline = time.monotonic() + s.request_timeout
        while info.status not in ("done", "failed"):
            if time.monotonic() > deadline:
                forget(info.id)
                if info.status == "queued":
                    retry = jobs.retry_after()
                    raise HTTPException(
                        503,
                        f"the painter is busy: waited {s.request_timeout:g} s for a free painter",
                        headers={"Retry-After": str(retry)},
                    )
                raise HTTPException(504, f"painting took longer than {s.request_timeout:g} s")
            if await request.is_disconnected():
                forget(info.id)
                return Response(status_code=499)  # type: ignore[return-value]
            await asyncio.sleep(0.05)
            info = lookup(info.id)
        if info.status == "failed":
            forget(info.id)
            raise HTTPException(_KIND_STATUS.get(info.error_kind or "", 500), info.error or "painting failed")
        try:
            png = await asyncio.to_thread(jobs.result_path(info.id).read_bytes)
        except (UnknownJobError, FileNotFoundError):
            raise HTTPException(500, "the painted picture expired before it could be sent") from None
        forget(info.id)  # /predict keeps nothing on disk
        return PredictOut(
            result=base64.b64encode(png).decode("ascii"),
            style=info.style,
            width=info.width or 0,
            height=info.height or 0,
            seconds=round((info.finished or time.time()) - (info.started or info.created), 3),
            waited=round((info.started or info.created) - info.created, 3),
        )

    @app.post("/api/jobs", status_code=202, response_model=JobOut, tags=["jobs"], summary="Queue a photo")
    async def create_job(job: Annotated[JobRequest, Depends(paint_request)]) -> JSONResponse:
        info = submit(job)
        return JSONResponse(info.public(), 202, headers={"Location": f"/api/jobs/{info.id}"})

    @app.get("/api/jobs/{job_id}", response_model=JobOut, tags=["jobs"], summary="A job's status")
    async def job_status(job_id: str) -> dict:
        return lookup(job_id).public()

    @app.get(
        "/api/jobs/{job_id}/result",
        tags=["jobs"],
        summary="A finished job's PNG",
        responses={200: {"content": {"image/png": {}}}, 409: {"description": "not done"}},
    )
    async def job_result(job_id: str) -> StreamingResponse:
        try:
            fh = open(jobs.result_path(job_id), "rb")  # noqa: SIM115 - closed by the stream
        except (UnknownJobError, FileNotFoundError):
            raise HTTPException(404, "no such job (unknown, expired or deleted)") from None
        except JobNotDoneError as exc:
            raise HTTPException(409, f"the picture is not ready: {exc}") from None
        size = os.fstat(fh.fileno()).st_size

        def chunks() -> Iterator[bytes]:
            with fh:
                yield from iter(lambda: fh.read(1 << 16), b"")

        return StreamingResponse(
            chunks(),
            media_type="image/png",
            headers={"Content-Length": str(size), "Cache-Control": "private, max-age=60"},
        )

    @app.delete("/api/jobs/{job_id}", tags=["jobs"], summary="Cancel a job or delete its result")
    async def delete_job(job_id: str) -> dict:
        try:
            info = jobs.cancel(job_id)
        except UnknownJobError:
            raise HTTPException(404, "no such job (unknown, expired or deleted)") from None
        return {"id": info.id, "status": "cancelled" if info.status in ("queued", "running") else "deleted"}

    # -- styles ------------------------------------------------------------------------------------------------
    def default_style_id() -> str | None:
        try:
            return store.resolve(None, s).id
        except StyleError:
            return None

    @app.get("/api/styles", response_model=list[StyleOut], tags=["styles"], summary="Every style")
    async def styles() -> list[dict]:
        default = default_style_id()
        return [
            {
                "id": st.style.id,
                "label": st.style.label,
                "description": st.style.description,
                "licence": st.style.licence.id,
                "licence_text": " ".join(filter(None, (st.style.licence.text, st.style.licence.note))),
                "licence_source": st.style.licence.source,
                "commercial": st.style.licence.commercial,
                "available": st.state != "unavailable",
                "reason": st.detail if st.state == "unavailable" else None,
                "state": st.state,
                "detail": st.detail,
                "engine": st.engine,
                "thumbnail": f"/api/styles/{st.style.id}/thumbnail",
                "default": st.style.id == default,
            }
            for st in await asyncio.to_thread(readiness.states)
        ]

    @app.get(
        "/api/styles/{style_id}/thumbnail",
        tags=["styles"],
        summary="A style's sample picture",
        responses={200: {"content": {"image/png": {}}}},
    )
    async def thumbnail(style_id: str) -> Response:
        found = [st for st in await asyncio.to_thread(store.style_status, s) if st.style.id == style_id]
        if not found:
            try:
                store.refuse_unoffered(store.get_style(style_id), s)
            except LicenceError as exc:
                raise HTTPException(403, str(exc)) from None
            except StyleError:
                pass
            raise HTTPException(404, f"unknown style {style_id!r}")
        png, final = await asyncio.to_thread(thumbs.get, found[0].style, found[0].available)
        headers = {
            "Cache-Control": "public, max-age=86400" if final else "no-store",
            "X-Thumbnail": "ready" if final else "pending",
        }
        return Response(png, media_type="image/png", headers=headers)

    @app.get("/api/config", response_model=ConfigOut, tags=["service"], summary="Limits the page needs")
    async def config() -> dict:
        return {
            "max_upload_bytes": s.max_upload_bytes,
            "max_pixels": s.max_pixels,
            "max_side": s.max_side,
            "default_style": default_style_id(),
            "faces": s.faces,
            "commercial_only": s.commercial_only,
            "version": __version__,
        }

    # -- operations --------------------------------------------------------------------------------------------
    @app.get("/healthz", tags=["service"], summary="The process is alive")
    async def healthz() -> dict:
        return {"status": "ok"}

    @app.get("/readyz", tags=["service"], summary="The default style's model is loaded")
    async def readyz() -> JSONResponse:
        if readiness.ready:
            states = {st.style.id: st.state for st in await asyncio.to_thread(readiness.states)
                      if st.state != "unavailable"}
            return JSONResponse({"status": "ready", "style": readiness.style_id, "styles": states})
        return JSONResponse({"detail": readiness.state}, 503, headers={"Retry-After": "2"})

    @app.get("/metrics", tags=["service"], summary="Prometheus metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)

    # -- the page ----------------------------------------------------------------------------------------------
    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    _mount_docs(app)
    return app


def _mount_docs(app: FastAPI) -> None:
    """Interactive API docs that work offline: Swagger UI's files come from the fastapi-offline package."""
    import fastapi_offline
    from fastapi.openapi.docs import get_swagger_ui_html

    assets = Path(fastapi_offline.__file__).parent / "static"
    app.mount("/docs-assets", StaticFiles(directory=assets), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> Response:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title="anipaint API",
            swagger_js_url="/docs-assets/swagger-ui-bundle.js",
            swagger_css_url="/docs-assets/swagger-ui.css",
            swagger_favicon_url="/docs-assets/favicon.png",
        )


def _default_queue(s: Settings, metrics: ServiceMetrics) -> JobQueue:
    if s.broker_url:
        from anipaint.service.celery_queue import CeleryJobQueue

        return CeleryJobQueue(s)
    return LocalJobQueue(s, observer=metrics)


def serve(host: str | None = None, port: int | None = None, settings: Settings | None = None) -> None:
    """Run the service with uvicorn (what ``anipaint serve`` calls)."""
    import uvicorn

    s = settings if settings is not None else get_settings()
    uvicorn.run(
        create_app(s),
        host=host or s.host,
        port=port if port is not None else s.port,
        log_level=s.log_level,
        timeout_graceful_shutdown=10,
    )


def main() -> None:
    """``python -m anipaint.service``."""
    serve()
