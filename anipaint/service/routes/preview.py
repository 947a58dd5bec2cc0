"""``POST /api/preview``: the photo as the painter sees it (upright, no metadata, long side capped), as a PNG, for
browsers that cannot decode the file themselves (HEIC on Chrome and Firefox). No painting, so no queue."""

from __future__ import annotations

from typing import Annotated

import anyio
from anyio.lowlevel import RunVar
from fastapi import APIRouter, Form, HTTPException
from fastapi.responses import Response

from anipaint import imaging, postprocess, preprocess
from anipaint.options import parse_max_side
from anipaint.service.deps import EMPTY_UPLOAD, ImagePart, MaxSide, SettingsDep, reading_upload
from anipaint.service.schemas import png_response, responses
from anipaint.service.uploads import read_upload

router = APIRouter(tags=["paint"])
# Decodes at once per server (event loop): each holds a whole picture in memory, and no queue bounds them.
_DECODES: RunVar[anyio.CapacityLimiter] = RunVar("preview_decodes")
PreviewSide = Annotated[MaxSide, Form(
    description="Long-side cap in pixels, as for painting (the preview then has the painted picture's size); "
    "0 or 'original' = full resolution; default: the configured cap.", examples=[256, "original"])]


def _decodes() -> anyio.CapacityLimiter:
    try:
        return _DECODES.get()
    except LookupError:
        _DECODES.set(limiter := anyio.CapacityLimiter(2))
        return limiter


def preview_png(data: bytes, max_side: int | None, max_pixels: int | None) -> bytes:
    """The picture decoded as the painter decodes it (EXIF orientation applied, metadata dropped) and capped as it
    caps it, so its size is the painted picture's; transparency kept."""
    work = preprocess.to_work_image(imaging.load_image(data, max_pixels=max_pixels), max_side)
    return imaging.encode_png(postprocess.finish(work.rgb, work.alpha))


@router.post(
    "/api/preview",
    response_class=Response,
    summary="The photo upright, as a PNG",
    description="The photo decoded by the server, upright and without metadata, its long side capped as a paint "
    "caps it: for clients that cannot decode the format themselves (HEIC/HEIF on most browsers).",
    responses={**png_response("The photo, upright and capped, as a PNG without metadata"),
               **responses(400, 401, 408, 413, 415, 422, 429, 500, 503)},
)
async def preview(s: SettingsDep, image: ImagePart, max_side: PreviewSide = None) -> Response:
    data = await read_upload(image, s.max_upload_bytes)
    if not data:
        raise HTTPException(415, EMPTY_UPLOAD)
    cap = parse_max_side(max_side, s.max_side)
    with reading_upload():
        png = await anyio.to_thread.run_sync(preview_png, data, cap, s.max_pixels, limiter=_decodes())
    return Response(png, media_type="image/png", headers={"Cache-Control": "no-store"})
