"""``POST /predict``: paint one photo and answer with the picture, through the same queue as ``/api/jobs``."""

from __future__ import annotations

import asyncio
import base64
import math
import time

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response

from anipaint.service.deps import OwnerDep, PaintRequestDep, QueueDep, SettingsDep, lookup, submit
from anipaint.service.queue.jobs import UnknownJobError
from anipaint.service.queue.local import RESTARTING, cancel_quietly
from anipaint.service.schemas import PredictOut, responses

router = APIRouter(tags=["paint"])
KIND_STATUS = {"image": 415, "style": 400, "download": 503, "busy": 503, "disk": 507, "storage": 503}


@router.post(
    "/predict",
    response_model=PredictOut,
    summary="Paint a photo and wait",
    responses=responses(400, 401, 403, 408, 413, 415, 422, 429, 500, 503, 504, 507),
)
async def predict(request: Request, job: PaintRequestDep, s: SettingsDep, jobs: QueueDep, who: OwnerDep) -> PredictOut:
    info = await asyncio.to_thread(submit, jobs, job, who)  # the picture is written to the store
    deadline = time.monotonic() + s.request_timeout
    while not info.over:
        if info.status == "queued" and jobs.draining():
            cancel_quietly(jobs, info.id)
            raise HTTPException(503, f"{RESTARTING}; try again shortly", headers={"Retry-After": "5"})
        if time.monotonic() > deadline:
            cancel_quietly(jobs, info.id)
            if info.status == "queued":
                retry = jobs.retry_after()
                raise HTTPException(
                    503,
                    f"the painter is busy: waited {s.request_timeout:g} s for a free painter",
                    headers={"Retry-After": str(retry)},
                )
            raise HTTPException(504, f"painting took longer than {s.request_timeout:g} s")
        if await request.is_disconnected():
            cancel_quietly(jobs, info.id)
            return Response(status_code=499)  # type: ignore[return-value]
        await asyncio.sleep(0.05)
        info = lookup(jobs, info.id, who)
    if info.status == "failed":
        cancel_quietly(jobs, info.id)
        status = KIND_STATUS.get(info.error_kind or "", 500)
        raise HTTPException(status, info.error or "painting failed", headers=_retry(status, info.retry_at))
    try:
        png = await asyncio.to_thread(jobs.result_path(info.id).read_bytes)
    except (UnknownJobError, FileNotFoundError):
        raise HTTPException(500, "the painted picture expired before it could be sent") from None
    finally:
        cancel_quietly(jobs, info.id)  # /predict keeps nothing on disk
    return PredictOut(
        result=base64.b64encode(png).decode("ascii"),
        style=info.style,
        width=info.width or 0,
        height=info.height or 0,
        seconds=round((info.finished or time.time()) - (info.started or info.created), 3),
        waited=round((info.started or info.created) - info.created, 3),
        faces_found=info.faces_found or 0,
        engine=info.engine,
    )


def _retry(status: int, retry_at: float | None) -> dict[str, str] | None:
    if status not in (503, 507):
        return None
    return {"Retry-After": str(max(1, math.ceil(retry_at - time.time())) if retry_at else 30)}
