"""``/api/jobs``: queue a photo or a clip, follow its progress, fetch or delete its result."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, JSONResponse

from anipaint.service.deps import NOT_FOUND, JobRequestDep, OwnerDep, QueueDep, lookup, submit
from anipaint.service.queue.jobs import JobNotDoneError, UnknownJobError
from anipaint.service.schemas import DeletedOut, JobOut, responses, result_response

router = APIRouter(prefix="/api/jobs", tags=["jobs"])


def _follow_up(method: str, path: str, description: str) -> dict:
    """An OpenAPI link from the 202 to the operation at ``path``, passing the answer's id as its job_id."""
    pointer = quote(path.replace("~", "~0").replace("/", "~1"))  # a JSON pointer, inside a URI fragment
    return {"operationRef": f"#/paths/{pointer}/{method}", "parameters": {"job_id": "$response.body#/id"},
            "description": description}


# The 202's id is what the job's own routes take: the links say so, so that clients (and schemathesis's stateful
# phase) follow a queued job with its real id.
JOB = f"{router.prefix}/{{job_id}}"
QUEUED = {
    202: {
        "description": "Queued; follow the job at its Location, or through the links with the answer's id",
        "headers": {"Location": {"schema": {"type": "string"}, "description": "The job's URL"}},
        "links": {
            "GetJob": _follow_up("get", JOB, "Follow the job's progress"),
            "GetJobResult": _follow_up("get", f"{JOB}/result", "Fetch the painted PNG once the job is done"),
            "DeleteJob": _follow_up("delete", JOB, "Cancel the job or delete its result"),
        },
    }
}


@router.post(
    "",
    status_code=202,
    response_model=JobOut,
    summary="Queue a photo, a video or an animated picture",
    responses={**QUEUED, **responses(400, 401, 403, 408, 413, 415, 422, 429, 503, 507)},
)
async def create_job(job: JobRequestDep, jobs: QueueDep, who: OwnerDep) -> JSONResponse:
    """A photo, or a video (MP4, MOV, WebM) or animated picture (GIF, WebP, APNG) within the video limits (413
    names the limit). A clip's progress counts frames; its result is an MP4 with the sound, or the animated
    picture in its own format."""
    info = await asyncio.to_thread(submit, jobs, job, who)  # the picture is written to the store
    return JSONResponse(info.public(), 202, headers={"Location": f"/api/jobs/{info.id}"})


@router.get("/{job_id}", response_model=JobOut, summary="A job's status", responses=responses(401, 404, 429))
async def job_status(job_id: str, jobs: QueueDep, who: OwnerDep) -> dict:
    return lookup(jobs, job_id, who).public()


@router.get(
    "/{job_id}/result",
    summary="A finished job's picture (PNG), video (MP4) or animated picture",
    response_class=FileResponse,
    responses={**result_response(), **responses(401, 404, 409, 429)},
)
async def job_result(job_id: str, jobs: QueueDep, who: OwnerDep) -> FileResponse:
    """Streamed from this server, with Range requests (a video seeks): the API's keys, limits and origin apply to
    results too, which a redirect to the object store would bypass. A scaled-out result is fetched from Redis or
    the object store into a local cache file first."""
    info = lookup(jobs, job_id, who)
    try:
        path = await asyncio.to_thread(jobs.result_path, job_id)  # may download: off the event loop
    except (UnknownJobError, FileNotFoundError):
        raise HTTPException(404, NOT_FOUND) from None
    except JobNotDoneError as exc:
        raise HTTPException(409, f"the picture is not ready: {exc}") from None
    return FileResponse(path, media_type=info.media_type or "image/png",
                        headers={"Cache-Control": "private, max-age=60"})


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
