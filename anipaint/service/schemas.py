"""Response shapes, for the OpenAPI document at /docs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

ENGINE = ("the backend the style's network ran on (torch, compiled, onnxruntime, strips or int8); a style paints "
          "on torch until its fast engine is built and measured on the machine that painted it.")


class PredictOut(BaseModel):
    result: str = Field(description="The painted picture, base64-encoded PNG.")
    style: str = Field(description="The style id that painted it.")
    width: int
    height: int
    seconds: float = Field(description="Seconds spent painting.")
    waited: float = Field(0.0, description="Seconds spent waiting in the queue.")
    faces_found: int = Field(0, ge=0, description="Faces restyled (0 when none was found or faces were off).")
    engine: str | None = Field(None, description=ENGINE)


class JobOut(BaseModel):
    id: str
    status: Literal["queued", "running", "done", "failed"]
    stage: str = Field(description="queued, decode, paint, faces, encode or done.")
    progress: float = Field(ge=0.0, le=1.0)
    position: int = Field(description="Place in the queue (1 = next); 0 once painting has started.")
    error: str | None = None
    error_kind: str | None = Field(None, description="image, style, busy or internal, when failed.")
    style: str
    width: int | None = None
    height: int | None = None
    faces_found: int | None = Field(None, ge=0, description="Once done: faces restyled (0 when none was found).")
    engine: str | None = Field(None, description="Once done: " + ENGINE)
    frame: int | None = Field(None, ge=0, description="A video or animated picture: frames painted so far.")
    frames: int | None = Field(None, ge=0, description="A video or animated picture: its frames (0: not known).")
    eta_seconds: float | None = Field(None, ge=0, description="While running: seconds left at the pace so far.")
    media_type: str | None = Field(None, description="Once done: the result's type (image/png, video/mp4, "
                                   "image/gif or image/webp).")


class StyleOut(BaseModel):
    id: str
    label: str
    description: str
    licence: str = Field(description="Licence id of the weights: Apache-2.0, CC-BY-NC-SA-4.0 or non-commercial.")
    licence_text: str = Field(description="The licence's terms, and what else to know (training data).")
    licence_source: str = Field(description="Where the weights and their terms come from.")
    commercial: bool = Field(description="Whether the weights' licence allows commercial use.")
    available: bool
    reason: str | None = Field(None, description="Why the style is not available here.")
    state: Literal["ready", "converting", "optimising", "download", "unavailable"] = Field(
        "ready", description="ready; converting (paints once converted, which the server is doing); optimising "
        "(paints now on its plain engine while its fast engine is built in the background); download (its files "
        "are downloaded on first use, or their download failed: see download_error and retry_at); unavailable "
        "(see reason)."
    )
    detail: str | None = Field(None, description="What is happening to the style, or why it is unavailable.")
    engine: str | None = Field(None, description="The backend its paints run on now (None until converted).")
    download_error: str | None = Field(None, description="Why the style's last download on first use failed.")
    retry_at: str | None = Field(None, description="When a paint tries that download again (ISO 8601, UTC); until "
                                 "then a paint of the style is answered 503 with Retry-After.")
    thumbnail: str = Field(description="URL of a sample picture painted in this style.")
    default: bool
    kind: Literal["style", "face"] = Field(
        "style", description="style: paints whole pictures (and backgrounds); face: an anime-face model for portraits."
    )


class ConfigOut(BaseModel):
    max_upload_bytes: int
    max_pixels: int
    max_side: int
    video_max_bytes: int = Field(description="A video or animated picture's upload limit (POST /api/jobs).")
    video_max_seconds: float = Field(description="A video's length limit, in seconds.")
    default_style: str | None
    faces: bool
    commercial_only: bool = Field(description="Only styles whose licence allows commercial use are offered.")
    version: str


class DeletedOut(BaseModel):
    id: str
    status: Literal["cancelled", "deleted"]


class HealthOut(BaseModel):
    status: Literal["ok"]


class ReadyOut(BaseModel):
    status: Literal["ready"]
    style: str | None
    styles: dict[str, str] = Field(default_factory=dict, description="Each available style's state.")


class ErrorOut(BaseModel):
    detail: str = Field(description="What went wrong, as a sentence to show the user.")


_WHY = {
    400: "The body is not a readable multipart form, the style is not one this server paints (see the form's enum "
    "and /api/styles), or a face style was asked to paint the background",
    401: "An API key is required (X-API-Key or Authorization: Bearer)",
    403: "Refused: the style's licence is not offered here, or this address may not read metrics",
    404: "No such job or style (unknown, expired, deleted or another key's)",
    408: "The client paused too long while sending the upload",
    409: "The job has no picture yet",
    413: "The upload has too many bytes or pixels",
    415: "The upload is empty, or is not a picture we accept",
    422: "A form field is invalid",
    429: "This key's rate limit or share of the queue is used up; see Retry-After",
    500: "An unexpected failure",
    503: "Busy or restarting; see Retry-After",
    504: "Painting took longer than the request timeout",
    507: "The server has no room to store or paint the picture",
}
_RETRY = {429, 503, 507}


def responses(*statuses: int) -> dict[int | str, dict]:
    """OpenAPI entries for error statuses: every error body is ``{"detail": "<sentence>"}``."""
    out: dict[int | str, dict] = {}
    for status in sorted({*statuses, 422}):
        entry: dict = {"model": ErrorOut, "description": _WHY[status]}
        if status in _RETRY:
            entry["headers"] = {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait"}}
        out[status] = entry
    return out


def result_response() -> dict[int | str, dict]:
    binary = {"schema": {"type": "string", "format": "binary"}}
    return {200: {"content": {t: binary for t in ("image/png", "video/mp4", "image/gif", "image/webp")},
                  "description": "The painted picture, video or animated picture"}}


def png_response(description: str = "PNG") -> dict[int | str, dict]:
    return {200: {"content": {"image/png": {"schema": {"type": "string", "format": "binary"}}},
                  "description": description}}
