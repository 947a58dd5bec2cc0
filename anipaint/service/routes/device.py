"""Painting on the device: the manifest of device models (``/api/device/styles``), the models themselves at
content-addressed URLs (``/device/models/<sha256>.onnx``, cached for good) and the page's service worker
(``/sw.js``, at the root so that it may cache the page).

The models are made by ``anipaint models prepare`` and the background warm-up
(:mod:`anipaint.engine.onnx.device_models`; for a live camera's frames, :mod:`~anipaint.engine.onnx.live_models`);
until a style's is made the manifest says "not ready yet" rather than building one in the middle of a request.
"""

from __future__ import annotations

import asyncio
import re

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field

from anipaint.engine.onnx import device_models, live_models
from anipaint.models import availability
from anipaint.service.deps import SettingsDep
from anipaint.service.routes.page import STATIC
from anipaint.service.schemas import responses
from anipaint.settings import Settings

router = APIRouter(tags=["device"])
RUNTIME = STATIC / "vendor" / "ort"
IMMUTABLE = {"Cache-Control": "public, max-age=31536000, immutable"}
NOT_READY = ("not ready yet: its device model is made by `anipaint models prepare` or the server's background "
             "preparation; paint it on the server meanwhile")
_SHA = re.compile(r"[0-9a-f]{64}")


class LiveModelOut(BaseModel):
    url: str = Field(description="The int8 ONNX file for live frames, at a content-addressed URL.")
    sha256: str
    bytes: int


class DeviceStyleOut(BaseModel):
    id: str
    label: str
    on_device: bool = Field(description="Whether the browser can paint this style now.")
    state: str = Field(description="ready, not_ready (being made or not made yet) or unsupported.")
    reason: str | None = Field(None, description="Why it cannot paint on the device (None when it can).")
    url: str | None = Field(None, description="The ONNX file, at a content-addressed URL (cache it for good).")
    sha256: str | None = Field(None, description="The file's sha256: check it before use.")
    bytes: int | None = None
    weights: str | None = Field(None, description="float16 or float32 (stored; the browser computes in float32).")
    multiple: int | None = Field(None, description="Pad H and W (reflected, bottom/right) to a multiple of this...")
    min_cells: int | None = Field(None, description="...and to at least this many multiples.")
    min_side: int | None = Field(None, description="Edge-pad smaller pictures to this first.")
    live: LiveModelOut | None = Field(None, description="The model for a live camera's frames (int8), where one "
                                      "pays; absent: the live view paints with the model above.")
    input: str = Field("NCHW float32 RGB, (byte / 127.5) - 1; the output the same, clamped to [-1, 1]",
                       description="How the network's input and output are normalised.")


def manifest(s: Settings) -> list[dict]:
    runtime = (RUNTIME / "ort.min.mjs").is_file()
    out = []
    for st in availability.style_status(s):
        style = st.style
        row: dict = {"id": style.id, "label": style.label, "on_device": False, "state": "unsupported"}
        reason = device_models.unsupported(style)
        model = None
        if reason is None and not runtime:
            reason = "the browser runtime (onnxruntime-web) is not installed here: run scripts/setup.sh"
        elif reason is None and not st.available:
            reason = st.reason or "the style is not available here"
        elif reason is None:
            model = device_models.read(style, s)
            if model is None:
                row["state"], reason = "not_ready", NOT_READY
        if model is not None:
            row.update(on_device=True, state="ready", url=f"/device/models/{model.sha256}.onnx", sha256=model.sha256,
                       bytes=model.bytes, weights=model.weights, multiple=model.multiple, min_cells=model.min_cells,
                       min_side=model.min_side)
            live = live_models.read(style, s)
            if live is not None:
                row["live"] = {"url": f"/device/models/{live.sha256}.onnx", "sha256": live.sha256, "bytes": live.bytes}
        row["reason"] = reason
        out.append(row)
    return out


@router.get("/api/device/styles", response_model=list[DeviceStyleOut], summary="Styles the browser can paint",
            responses=responses(401, 429))
async def device_styles(s: SettingsDep) -> list[dict]:
    return await asyncio.to_thread(manifest, s)


def _find(s: Settings, sha256: str):
    for st in availability.style_status(s):
        if device_models.unsupported(st.style) is None and st.converted:
            model = device_models.read(st.style, s)
            if model is not None and model.sha256 == sha256:
                return device_models.path_of(model, st.style, s)
            live = live_models.read(st.style, s)
            if live is not None and live.sha256 == sha256:
                return live_models.path_of(live, st.style, s)
    return None


@router.get("/device/models/{name}", summary="A device model file", response_class=FileResponse,
            responses={200: {"content": {"application/octet-stream": {}}, "description": "The ONNX file"},
                       **responses(404)})
async def device_model(name: str, request: Request, s: SettingsDep) -> FileResponse:
    sha = name.removesuffix(".onnx")
    path = await asyncio.to_thread(_find, s, sha) if _SHA.fullmatch(sha) and name.endswith(".onnx") else None
    if path is None:
        raise HTTPException(404, "no device model has that checksum here")
    return FileResponse(path, media_type="application/octet-stream", headers=IMMUTABLE)


@router.get("/sw.js", include_in_schema=False)
async def service_worker() -> FileResponse:
    # At the root, so that its scope is the whole site; never cached, so that a new version takes over.
    return FileResponse(STATIC / "sw.js", media_type="text/javascript", headers={"Cache-Control": "no-cache"})
