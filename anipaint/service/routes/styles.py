"""``/api/styles`` and ``/api/config``: what the page needs to offer styles and respect the server's limits."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response

from anipaint import __version__
from anipaint.errors import LicenceError, StyleError
from anipaint.models import availability
from anipaint.models.registry import get_style
from anipaint.service.deps import SettingsDep
from anipaint.service.schemas import ConfigOut, StyleOut, png_response, responses
from anipaint.settings import Settings

router = APIRouter(tags=["styles"])


def default_style_id(s: Settings) -> str | None:
    try:
        return availability.resolve(None, s).id
    except StyleError:
        return None


@router.get("/api/styles", response_model=list[StyleOut], summary="Every style", responses=responses(401, 429))
async def styles(request: Request, s: SettingsDep) -> list[dict]:
    default = default_style_id(s)
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
            "download_error": st.failed_download.why if st.failed_download else None,
            "retry_at": _iso(st.failed_download.retry_at) if st.failed_download else None,
            "thumbnail": f"/api/styles/{st.style.id}/thumbnail",
            "default": st.style.id == default,
            "kind": st.style.kind,
        }
        for st in await asyncio.to_thread(request.app.state.readiness.states)
    ]


def _iso(when: float) -> str:
    return datetime.fromtimestamp(when, timezone.utc).isoformat(timespec="seconds")


@router.get(
    "/api/styles/{style_id}/thumbnail",
    summary="A style's sample picture",
    response_class=Response,
    responses={**png_response(), **responses(401, 403, 404, 429)},
)
async def thumbnail(style_id: str, request: Request, s: SettingsDep) -> Response:
    found = [st for st in await asyncio.to_thread(availability.style_status, s) if st.style.id == style_id]
    if not found:
        try:
            availability.refuse_unoffered(get_style(style_id), s)
        except LicenceError as exc:
            raise HTTPException(403, str(exc)) from None
        except StyleError:
            pass
        raise HTTPException(404, f"unknown style {style_id!r}")
    png, what = await asyncio.to_thread(request.app.state.thumbs.get, found[0].style, found[0].available)
    headers = {"Cache-Control": "public, max-age=86400" if what == "ready" else "no-store", "X-Thumbnail": what}
    return Response(png, media_type="image/png", headers=headers)


@router.get(
    "/api/config", response_model=ConfigOut, tags=["service"], summary="Limits the page needs",
    responses=responses(401, 429),
)
async def config(s: SettingsDep) -> dict:
    return {
        "max_upload_bytes": s.max_upload_bytes,
        "max_pixels": s.max_pixels,
        "max_side": s.max_side,
        "video_max_bytes": s.video_max_bytes,
        "video_max_seconds": s.video_max_seconds,
        "default_style": default_style_id(s),
        "faces": s.faces,
        "commercial_only": s.commercial_only,
        "version": __version__,
    }
