"""What route handlers receive through FastAPI dependencies: the settings, the job queue, the metrics, the caller's
API key, and a validated paint request (uploads size-checked, headers probed, the style resolved)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Literal, Union

from fastapi import Depends, File, Form, HTTPException, Request, UploadFile
from pydantic import BeforeValidator, Field
from pydantic_core import PydanticCustomError

from anipaint import imaging
from anipaint.engine import tiling
from anipaint.engine.strips import scratch
from anipaint.errors import ImageError, ImageTooLargeError, LicenceError, OptionError, StyleError
from anipaint.media.frames import STILLS_ONLY
from anipaint.models import availability
from anipaint.models.registry import ALIASES, Style, all_styles, get_style
from anipaint.networks.architectures import get_architecture
from anipaint.options import FULL_RESOLUTION, MAX_SIDE_RANGE, Option, PaintOptions, options
from anipaint.painter import check_background, styles_used
from anipaint.service import clips
from anipaint.service.metrics import ServiceMetrics
from anipaint.service.queue.jobs import (
    JobInfo,
    JobQueue,
    JobRequest,
    QueueFullError,
    UnknownJobError,
    download_failed,
)
from anipaint.service.uploads import rewound, spooled_upload, too_large_message
from anipaint.settings import Settings


def _form_switch(value: object) -> object:
    """An on/off form field is true or false (any case), as a form carries a boolean; pydantic alone would also
    take 1/0, yes/no and on/off, which the document does not offer."""
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise PydanticCustomError("bool_parsing", "must be true or false")


# The API types per option kind (see _form_field). Every style name in the table is parsed, so that a style this
# server cannot paint is answered with its reason (400, or 403 for a licence) rather than a bare 422; the document
# lists only the names this server paints (style_choices).
STYLE_NAMES = tuple(s.id for s in all_styles()) + tuple(ALIASES)
StyleName = Literal[STYLE_NAMES]  # type: ignore[valid-type]
MaxSide = Union[  # noqa: UP007 - a runtime type expression for FastAPI's form parsing
    Annotated[int, Field(ge=MAX_SIDE_RANGE[0], le=MAX_SIDE_RANGE[1])], Literal[0], Literal[FULL_RESOLUTION]
]
Switch = Annotated[bool, BeforeValidator(_form_switch)]
# What a field of each kind may say, for the document (a style's are its enum).
_EXAMPLES = {"side": [256, "original"], "switch": [True, False], "fraction": [0.6]}
# OpenAPI 3.1 spells a file part as contentMediaType application/octet-stream; format binary says the same to
# older tools (and makes schemathesis send real picture files), minLength that an empty part is not a photo.
ImagePart = Annotated[UploadFile, File(description=f"The photo ({imaging.FORMAT_NAMES}); not empty.",
                                       json_schema_extra={"format": "binary", "minLength": 1})]
NOT_FOUND = "no such job (unknown, expired or deleted)"
EMPTY_UPLOAD = "the upload is empty; choose a photo"
UNREADABLE = (f"cannot read the file: send a picture ({imaging.FORMAT_NAMES}) or, as a job, a video "
              f"({clips.VIDEO_NAMES})")
log = logging.getLogger("anipaint.service")


def settings(request: Request) -> Settings:
    return request.app.state.settings


def queue(request: Request) -> JobQueue:
    return request.app.state.jobs


def metrics(request: Request) -> ServiceMetrics:
    return request.app.state.metrics


def owner(request: Request) -> str | None:
    """The id of the API key that made this request (set by the key check), or None without keys."""
    return getattr(request.state, "owner", None)


SettingsDep = Annotated[Settings, Depends(settings)]
QueueDep = Annotated[JobQueue, Depends(queue)]
MetricsDep = Annotated[ServiceMetrics, Depends(metrics)]
OwnerDep = Annotated[str | None, Depends(owner)]


def _form_field(option: Option) -> inspect.Parameter:
    """A paint option as a multipart form field. Optional fields are typed without None: a form field is absent or
    has a value, it cannot be null; absent means the option's default."""
    api_type = {"style": StyleName, "side": MaxSide, "switch": Switch, "fraction": float}[option.kind]
    limits = {"ge": 0.0, "le": 1.0} if option.kind == "fraction" else {}
    default = option.default if option.kind in ("switch", "fraction") else None
    form = Form(description=option.help, examples=_EXAMPLES.get(option.kind), **limits)
    return inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[api_type, form])


async def paint_request(s: SettingsDep, image: ImagePart, **form: object) -> JobRequest:
    """The upload checked (size, header, pixels) and the paint options settled: styles resolved, the size cap
    decided, full resolution admitted or refused. A picture only (a clip goes through /api/jobs)."""
    return await _request(s, image, form, clips_allowed=False)


async def job_request(s: SettingsDep, image: ImagePart, **form: object) -> JobRequest:
    """As :func:`paint_request`, and a video or animated picture within the video limits too."""
    return await _request(s, image, form, clips_allowed=True)


async def _request(s: Settings, image: UploadFile, form: dict, *, clips_allowed: bool) -> JobRequest:
    defaults = {option.name: option.default for option in options()}
    try:
        asked = PaintOptions(**{k: v for k, v in form.items() if v is not None or defaults[k] is None})
        settled = asked.settled(s)
    except OptionError as exc:
        raise HTTPException(422, str(exc)) from None
    chosen = resolve_style(settled.style, s)
    settled = replace(
        settled, style=chosen.id,
        face_style=resolve_style(settled.face_style, s).id if settled.face_style else None,
        background=resolve_style(settled.background, s, background=True).id if settled.background else None,
    )
    refuse_pending_downloads(settled, s)
    limit = max(s.max_upload_bytes, s.video_max_bytes) if clips_allowed else s.max_upload_bytes
    data, size = spooled_upload(image, limit)
    if not size:
        raise HTTPException(415, EMPTY_UPLOAD)
    name = Path(image.filename or "image").stem[:80] or "image"
    with reading_upload():
        kind = await asyncio.to_thread(clips.clip_of, data)
        if kind is not None:
            if not clips_allowed:
                raise HTTPException(415, f"a {'video' if kind == 'video' else 'moving picture'} is painted as a "
                                         "job: POST it to /api/jobs")
            # A clip paints faces only when asked for: a face pass per frame costs time and can flicker.
            settled = replace(settled, faces=asked.faces is True)
            if settled.portrait or settled.background:
                raise HTTPException(422, STILLS_ONLY)
            await asyncio.to_thread(clips.check_clip, data, s)
            return JobRequest(data=data, options=settled, name=name)
        if size > s.max_upload_bytes:
            raise HTTPException(413, too_large_message(s.max_upload_bytes))
        width, height, _ = imaging.probe_image(rewound(data))
        imaging.check_limits(width, height, s.max_pixels)
    if settled.max_side is None:
        check_full_resolution(s, chosen, width, height)
    return JobRequest(data=data, options=settled, name=name)


@contextlib.contextmanager
def reading_upload() -> Iterator[None]:
    """Where an upload is read: a file over a limit is 413, one we cannot read 415. The decoders meet hostile files
    and some fail in ways of their own (a ValueError, a struct.error); that is still the file's fault, answered 415
    and logged, never a 500."""
    try:
        yield
    except HTTPException:
        raise
    except ImageTooLargeError as exc:
        raise HTTPException(413, str(exc)) from None
    except ImageError as exc:
        raise HTTPException(415, str(exc)) from None
    except Exception:
        log.warning("a reader failed on an upload; answered 415", exc_info=True)
        raise HTTPException(415, UNREADABLE) from None


# FastAPI reads the form's fields from the signature, so they are generated from the options' definition.
for _dependency in (paint_request, job_request):
    _dependency.__signature__ = inspect.signature(_dependency).replace(  # type: ignore[attr-defined]
        parameters=[*list(inspect.signature(_dependency).parameters.values())[:2],
                    *(_form_field(option) for option in options())]
    )


def refuse_pending_downloads(settled: PaintOptions, s: Settings) -> None:
    """503 with Retry-After, before anything is queued, while a style the paint needs waits for the retry time of
    its failed download: a request for it costs no painter and no network until then."""
    for style_id in styles_used(settled, s):
        pending = availability.download_pending(get_style(style_id), s)
        if pending is not None:
            raise HTTPException(503, download_failed(style_id, pending.why, pending.retry_at),
                                headers={"Retry-After": str(pending.seconds_left())})


def resolve_style(name: str | None, s: Settings, *, background: bool = False) -> Style:
    """The style to paint with (403: refused by its licence here; 400: unknown, unavailable, or a face style asked
    to paint a background)."""
    try:
        style = availability.resolve(name, s)
        if background:
            check_background(style)
    except LicenceError as exc:
        raise HTTPException(403, str(exc)) from None
    except (StyleError, OptionError) as exc:
        raise HTTPException(400, str(exc)) from None
    return style


def style_choices(s: Settings) -> dict[str, list[str]]:
    """Each style field's names (ids and aliases) that this server paints now: exactly those resolve_style
    accepts, so the document's enums are what is answered with a picture. Licences (commercial-only mode) and
    availability come from :mod:`anipaint.models.availability`; ``background`` leaves out the face styles."""
    return {
        option.name: [name for name in STYLE_NAMES if _paints(name, s, background=option.name == "background")]
        for option in options() if option.kind == "style"
    }


def _paints(name: str, s: Settings, *, background: bool) -> bool:
    try:
        resolve_style(name, s, background=background)
    except HTTPException:
        return False
    return True


def document_style_choices(document: dict, choices: dict[str, list[str]]) -> dict:
    """``document`` (the app's OpenAPI) with the paint forms' style enums narrowed to ``choices``
    (:func:`style_choices`)."""
    schemas = document.get("components", {}).get("schemas", {})
    for methods in document.get("paths", {}).values():
        for operation in methods.values():
            form = operation.get("requestBody", {}).get("content", {}).get("multipart/form-data", {})
            ref = form.get("schema", {}).get("$ref", "")
            properties = schemas.get(ref.rsplit("/", 1)[-1], {}).get("properties", {})
            for name, names in choices.items():
                if "enum" in properties.get(name, {}):
                    properties[name]["enum"] = names
    return document


def check_full_resolution(s: Settings, style: Style, width: int, height: int) -> None:
    """Full resolution is bounded per request: a pixel budget (413), and the scratch space the exact layer-by-layer
    paint needs, with ``scratch_reserve_bytes`` left over (507)."""
    budget = s.full_max_pixels or s.max_pixels
    pixels = width * height
    if budget and pixels > budget:
        raise HTTPException(
            413,
            f"full resolution is limited to {budget / 1e6:.1f} MP here and this picture has {pixels / 1e6:.1f} MP; "
            "choose a smaller size (max_side)",
        )
    in_strips = get_architecture(style.architecture).has_strips and s.large_in_strips
    if in_strips and tiling.needs_tiling(height, width, s.tile_size):
        if scratch.free_bytes(s) < scratch.needed_bytes(width, height) + s.scratch_reserve_bytes:
            raise HTTPException(
                507,
                "the server has not enough scratch space to paint this picture at full resolution now; "
                "choose a smaller size (max_side) or try again later",
                headers={"Retry-After": "60"},
            )


PaintRequestDep = Annotated[JobRequest, Depends(paint_request)]
JobRequestDep = Annotated[JobRequest, Depends(job_request)]


def submit(jobs: JobQueue, request: JobRequest, who: str | None) -> JobInfo:
    try:
        return jobs.submit(request, owner=who)
    except QueueFullError as exc:
        raise HTTPException(
            503,
            f"the painter is busy: {exc}; try again in {exc.retry_after} s",
            headers={"Retry-After": str(exc.retry_after)},
        ) from None


def lookup(jobs: JobQueue, job_id: str, who: str | None) -> JobInfo:
    """The job, if it exists and belongs to the caller (another key's job is answered as unknown)."""
    try:
        info = jobs.get(job_id)
    except UnknownJobError:
        raise HTTPException(404, NOT_FOUND) from None
    if info.owner != who:
        raise HTTPException(404, NOT_FOUND)
    return info
