"""``/api/jobs``: queue a photo, follow its progress, fetch or delete its picture."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

from fastapi import APIRouter, HTTPException
from fastapi.responses import JSONResponse, StreamingResponse

from anipaint.service.deps import NOT_FOUND, OwnerDep, PaintRequestDep, QueueDep, lookup, submit
from anipaint.service.jobs import JobNotDoneError, UnknownJobError
from anipaint.service.models import DeletedOut, JobOut, png_response, responses

router = APIRouter(prefix="/api/jobs", tags=["jobs"])


@router.post(
    "",
    status_code=202,
    response_model=JobOut,
    summary="Queue a photo",
    responses=responses(400, 401, 403, 413, 415, 422, 429, 503, 507),
)
async def create_job(job: PaintRequestDep, jobs: QueueDep, who: OwnerDep) -> JSONResponse:
    info = await asyncio.to_thread(submit, jobs, job, who)  # the picture is written to the store
    return JSONResponse(info.public(), 202, headers={"Location": f"/api/jobs/{info.id}"})


@router.get("/{job_id}", response_model=JobOut, summary="A job's status", responses=responses(401, 404, 429))
async def job_status(job_id: str, jobs: QueueDep, who: OwnerDep) -> dict:
    return lookup(jobs, job_id, who).public()


@router.get(
    "/{job_id}/result",
    summary="A finished job's PNG",
    response_class=StreamingResponse,
    responses={**png_response(), **responses(401, 404, 409, 429)},
)
async def job_result(job_id: str, jobs: QueueDep, who: OwnerDep) -> StreamingResponse:
    lookup(jobs, job_id, who)
    try:
        fh = open(jobs.result_path(job_id), "rb")  # noqa: SIM115 - closed by the stream
    except (UnknownJobError, FileNotFoundError):
        raise HTTPException(404, NOT_FOUND) from None
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


@router.delete(
    "/{job_id}",
    response_model=DeletedOut,
    summary="Cancel a job or delete its result",
    responses=responses(401, 404, 429),
)
async def delete_job(job_id: str, jobs: QueueDep, who: OwnerDep) -> dict:
    lookup(jobs, job_id, who)
    try:
        info = jobs.cancel(job_id)
    except UnknownJobError:
        raise HTTPException(404, NOT_FOUND) from None
    return {"id": info.id, "status": "cancelled" if info.status in ("queued", "running") else "deleted"}
