"""The web service: the page at ``/`` and a small HTTP API over the painter, all through one bounded queue.

:func:`create_app` wires the parts: the job queue (:mod:`.queue.local` or :mod:`.queue.celery`), the routers per
area (:mod:`.routes`), the error answers (:mod:`.errors`) and the request guards (:mod:`.guards`: body limits,
timeouts, security headers, API keys). :mod:`.server` runs it with uvicorn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.staticfiles import StaticFiles

from anipaint import __version__
from anipaint.service import deps, errors
from anipaint.service.guards import ApiKeys, SecurityHeaders, UploadGate, load_keys
from anipaint.service.metrics import ServiceMetrics
from anipaint.service.queue.jobs import JobQueue, Runner
from anipaint.service.queue.local import LocalJobQueue
from anipaint.service.readiness import Readiness
from anipaint.service.routes import device, jobs, ops, page, paint, preview, styles
from anipaint.service.thumbnails import Thumbnails
from anipaint.service.uploads import FORM_SLACK, BodyLimit
from anipaint.settings import Settings, get_settings

log = logging.getLogger("anipaint.service")


def create_app(settings: Settings | None = None, queue: JobQueue | None = None, runner: Runner | None = None
               ) -> FastAPI:
    """The FastAPI app. ``queue`` defaults to a :class:`LocalJobQueue` with ``settings.jobs`` painters running
    ``runner`` (the painter by default), or to Celery workers when ``settings.broker_url`` is set (then this
    process paints nothing itself)."""
    s = settings if settings is not None else get_settings()
    metrics = ServiceMetrics()
    job_queue: JobQueue = queue if queue is not None else _default_queue(s, metrics, runner)
    metrics.watch(job_queue)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        job_queue.start()
        app.state.readiness.start()
        yield
        await asyncio.to_thread(job_queue.stop)

    app = FastAPI(
        title="anipaint",
        version=__version__,
        summary="Photos in, anime-style pictures out.",
        description="Paint a photo in an AnimeGAN style. `/predict` answers in one request; `/api/jobs` "
        "queues a picture and reports its progress. Both share one bounded queue: when it is full the "
        "answer is 503 with a Retry-After header.",
        lifespan=lifespan,
        docs_url=None,  # served by the page router from fastapi-offline's files: the default loads a CDN
    )
    app.state.settings, app.state.jobs, app.state.metrics = s, job_queue, metrics
    app.openapi = _truthful_openapi(app, s)  # type: ignore[method-assign]
    app.state.readiness = Readiness(s, warm=isinstance(job_queue, LocalJobQueue))
    app.state.thumbs = Thumbnails(s)
    app.add_middleware(
        BodyLimit,
        max_body=s.max_upload_bytes + FORM_SLACK,
        upload_limit=s.max_upload_bytes,
        larger={"/api/jobs": max(s.max_upload_bytes, s.video_max_bytes)},  # videos go there
        on_reject=lambda: metrics.reject("too_large"),
    )
    app.add_middleware(UploadGate, settings=s, queue=job_queue, metrics=metrics)
    keys = load_keys(s.api_keys)
    if keys:
        app.add_middleware(ApiKeys, settings=s, keys=keys, queue=job_queue, metrics=metrics)
    origins = [o.strip() for o in s.cors_origins.split(",") if o.strip()]
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "X-API-Key"],
            expose_headers=["Location", "Retry-After"],
        )
    app.add_middleware(SecurityHeaders)
    errors.install(app)
    for router in (paint.router, preview.router, jobs.router, styles.router, device.router, ops.router, page.router):
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=page.STATIC), name="static")
    app.mount("/docs-assets", StaticFiles(directory=page.docs_assets()), name="docs-assets")
    return app


def _truthful_openapi(app: FastAPI, s: Settings) -> Callable[[], dict]:
    """``app.openapi`` with the paint forms' style enums listing only the styles this server paints.

    Which styles paint here changes only when their files are added or removed (``anipaint models fetch`` or
    ``add``, a deleted store): the store counts a style whose sources are here as available before it is
    converted, so background warm-up converts styles already listed and never adds one. The document is
    therefore built once and rebuilt whenever that set differs (a few file checks per request of the document),
    so it is true whenever it is fetched; a style that stops being available in between, or whose conversion
    fails, is answered 400, which the paint routes document."""
    built_for: list[dict] = []

    def openapi() -> dict:
        choices = deps.style_choices(s)
        if app.openapi_schema is None or built_for != [choices]:
            app.openapi_schema = None
            app.openapi_schema = deps.document_style_choices(FastAPI.openapi(app), choices)
            built_for[:] = [choices]
        return app.openapi_schema

    return openapi


def _default_queue(s: Settings, metrics: ServiceMetrics, runner: Runner | None) -> JobQueue:
    if s.broker_url:
        from anipaint.service.queue.celery import CeleryJobQueue

        return CeleryJobQueue(s)
    return LocalJobQueue(s, runner, observer=metrics)
