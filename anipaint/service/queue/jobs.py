"""The job life cycle, written once for both queues: what a job is, the states it moves through, and how one job
is painted.

A job is admitted ``queued`` (persisted with its picture before the client hears 202), becomes ``running`` when a
painter takes it, and ends ``done`` (a PNG is stored) or ``failed`` (with a reason a user can read). Progress only
moves forward and stays below 1.0 until the picture is stored. Deleting a job is how a client cancels it: the
store forgets it, the painter notices on its next progress report and writes nothing. Finished jobs expire after
``settings.result_ttl`` seconds. After a restart, queued jobs are painted and jobs that were running fail with
:data:`INTERRUPTED`.

Where the state lives is a :class:`JobStore` (files for the embedded queue, Redis for Celery); who paints is a
runner (painter threads in :mod:`.local`, a Celery task in :mod:`.celery`). Both call
:func:`run_job`, so the semantics cannot drift apart.
"""

from __future__ import annotations

import errno
import logging
import math
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Literal, Protocol

from anipaint.errors import DownloadError, ImageError, ScratchSpaceError, StyleError
from anipaint.options import PaintOptions
from anipaint.service import clips
from anipaint.service.uploads import UploadData, rewound
from anipaint.settings import Settings

log = logging.getLogger("anipaint.service")

JobState = Literal["queued", "running", "done", "failed"]
Progress = Callable[..., None]  # (stage, fraction, frame=(done, total) for a clip)
JOB_ID = re.compile(r"^[A-Za-z0-9_-]{24}$")
INTERRUPTED = "interrupted by a restart"
NO_ROOM = "the server has no room left to store pictures; try again later"
NO_STORAGE = "the server cannot store pictures right now; try again later"
_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def new_job_id() -> str:
    return secrets.token_urlsafe(18)  # 24 characters, matching JOB_ID


@dataclass(frozen=True)
class JobRequest:
    """What to paint: the picture or clip, its options settled (style ids resolved, the size cap decided;
    ``max_side`` None means full resolution) and the name the result is offered under. ``data`` is the upload's
    spooled file when the web process admits a job (the store copies it in parts), and bytes when a painter loads
    it back."""

    data: UploadData
    options: PaintOptions
    name: str = "image"

    @property
    def style(self) -> str:
        return self.options.style or ""

    def to_json(self) -> dict:
        """Everything but the picture, as JSON-safe values (stored beside the picture)."""
        return {**self.options.to_json(), "name": self.name}

    @classmethod
    def from_json(cls, raw: dict, data: UploadData) -> JobRequest:
        return cls(data=data, options=PaintOptions.from_json(raw), name=raw.get("name", "image"))


@dataclass(frozen=True)
class JobInfo:
    """A snapshot of a job, safe to hand to another thread or serialise."""

    id: str
    status: JobState
    style: str
    stage: str = "queued"
    progress: float = 0.0
    position: int = 0  # 1 = next to start; 0 once running or finished
    error: str | None = None
    error_kind: str | None = None  # image | style | download | busy | disk | storage | internal: /predict's status
    retry_at: float | None = None  # failed for now (a download): when trying again may succeed
    width: int | None = None
    height: int | None = None
    faces_found: int | None = None  # once done: faces restyled (0 when none was found or the face pass was off)
    engine: str | None = None  # once done: the backend that painted it
    created: float = 0.0
    started: float | None = None
    finished: float | None = None
    owner: str | None = None  # the API key's id that made the job, when keys are required
    frame: int | None = None  # a clip: frames painted so far
    frames: int | None = None  # a clip: its frames (0 when the container does not say)
    media_type: str | None = None  # once done: the result's type (image/png, video/mp4, image/gif, image/webp)

    def public(self) -> dict:
        keys = ("id", "status", "stage", "progress", "position", "error", "error_kind", "style", "width", "height",
                "faces_found", "engine", "frame", "frames", "media_type")
        return {**{k: getattr(self, k) for k in keys}, "eta_seconds": self.eta_seconds()}

    def eta_seconds(self, now: float | None = None) -> float | None:
        """While running, the seconds left at the pace so far (None until there is a pace to go by)."""
        if self.status != "running" or self.started is None or self.progress < 0.05:
            return None
        elapsed = (time.time() if now is None else now) - self.started
        return round(elapsed * (1 - self.progress) / self.progress, 1)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict) -> JobInfo:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in known})

    @property
    def over(self) -> bool:
        return self.status in ("done", "failed")


class QueueFullError(Exception):
    """Every painter is busy and every waiting slot is taken (or the server is stopping)."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class UnknownJobError(KeyError):
    """No such job (never existed, expired, or deleted)."""


class JobNotDoneError(Exception):
    """The job has no result (yet)."""

    def __init__(self, info: JobInfo) -> None:
        super().__init__(f"job is {info.status}" + (f": {info.error}" if info.error else ""))
        self.info = info


class JobCancelled(Exception):
    """Raised inside a running job's progress callback to stop it early."""


class JobInterrupted(Exception):
    """Raised inside a running job's progress callback when the server stops before the paint could finish."""


@dataclass(frozen=True)
class PaintOutput:
    png: bytes  # the result: a PNG, or for a clip its MP4 or animated picture
    width: int
    height: int
    faces_found: int = 0
    engine: str | None = None
    media_type: str = "image/png"
    frames: int = 0  # a clip's painted frames


Runner = Callable[[JobRequest, Progress], PaintOutput]


class JobStore(Protocol):
    """Where jobs, their pictures and their results live. Every write is all or nothing."""

    def create(self, info: JobInfo, request: JobRequest) -> None: ...  # raises OSError when it cannot persist
    def load(self, job_id: str) -> JobInfo: ...  # raises UnknownJobError
    def update(self, info: JobInfo) -> bool: ...  # False: the job is gone (deleted = cancelled)
    def request(self, job_id: str) -> JobRequest | None: ...  # None: its picture is gone
    def save_result(self, job_id: str, png: bytes) -> None: ...
    def result_path(self, job_id: str) -> Path: ...  # raises UnknownJobError
    def delete(self, job_id: str) -> JobInfo: ...  # forget the job and its files; raises UnknownJobError
    def release_input(self, job_id: str) -> None: ...


class QueueObserver(Protocol):
    def stage_done(self, stage: str, seconds: float) -> None: ...
    def job_done(self, outcome: str) -> None: ...


class JobQueue(Protocol):
    """What the web service needs from a queue, local or remote."""

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def drain(self) -> None: ...  # stop admitting and starting jobs; the running ones finish
    def submit(self, request: JobRequest, owner: str | None = None) -> JobInfo: ...  # raises QueueFullError
    def get(self, job_id: str) -> JobInfo: ...  # raises UnknownJobError
    def result_path(self, job_id: str) -> Path: ...  # raises UnknownJobError, JobNotDoneError
    def cancel(self, job_id: str) -> JobInfo: ...  # raises UnknownJobError; forgets the job
    def depth(self) -> int: ...  # jobs waiting for a painter
    def running(self) -> int: ...
    def full(self) -> bool: ...  # a new job would be refused
    def owned(self, owner: str) -> int: ...  # jobs of this owner queued or running
    def retry_after(self) -> int: ...  # seconds a rejected client should wait
    def health(self) -> str | None: ...  # None, or why no painter can work
    def draining(self) -> bool: ...  # stopping: no new jobs start


# -- transitions ---------------------------------------------------------------------------------------------------
def admitted(request: JobRequest, *, position: int, owner: str | None = None) -> JobInfo:
    return JobInfo(
        id=new_job_id(), status="queued", style=request.style, position=position, created=time.time(), owner=owner
    )


def started(info: JobInfo) -> JobInfo:
    return replace(info, status="running", stage="starting", position=0, started=time.time())


def advanced(info: JobInfo, stage: str, fraction: float, frame: tuple[int, int] | None = None) -> JobInfo:
    """Progress moves forward only, and reaches 1.0 only when the picture is stored. A clip also counts frames."""
    progress = round(min(0.99, max(info.progress, float(fraction))), 3)
    if frame is None:
        return replace(info, stage=stage, progress=progress)
    return replace(info, stage=stage, progress=progress, frame=frame[0], frames=frame[1])


def finished(info: JobInfo, out: PaintOutput) -> JobInfo:
    return replace(
        info, status="done", stage="done", progress=1.0, width=out.width, height=out.height,
        faces_found=out.faces_found, engine=out.engine, finished=time.time(), media_type=out.media_type,
        frame=out.frames if out.frames else info.frame, frames=out.frames if out.frames else info.frames,
    )


def failed(info: JobInfo, error: str, kind: str, retry_at: float | None = None) -> JobInfo:
    return replace(info, status="failed", error=error, error_kind=kind, position=0, finished=time.time(),
                   retry_at=retry_at)


def download_failed(style: str, why: str, retry_at: float | None, *, lasting: bool = False) -> str:
    """What an API caller reads when a style's files could not be downloaded here (no command to run, no address)."""
    if lasting:
        return f"style {style} cannot be downloaded here ({why}); choose another style"
    wait = f"; try again in {max(1, math.ceil(retry_at - time.time()))} s" if retry_at else "; try again later"
    return f"style {style} is not on this server yet and could not be downloaded ({why}){wait}"


def failure(exc: BaseException, job_id: str = "?") -> tuple[str, str]:
    """(reason, kind) for a job that raised: a sentence for the user, never a server path; internal errors and
    storage trouble are logged with their traceback."""
    if isinstance(exc, DownloadError):
        reason = download_failed(exc.style or "?", exc.why, exc.retry_at, lasting=exc.lasting)
        return reason, "style" if exc.lasting else "download"
    if isinstance(exc, ImageError):
        return str(exc) or "the picture could not be read", "image"
    if isinstance(exc, StyleError):
        return str(exc) or "the style is not available", "style"
    if isinstance(exc, ScratchSpaceError) or (isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS):
        log.warning("job %s: out of space: %s", job_id, exc)
        return NO_ROOM, "disk"
    if isinstance(exc, OSError):
        log.exception("job %s: storage failed", job_id, exc_info=exc)
        return NO_STORAGE, "storage"
    log.exception("job %s failed", job_id, exc_info=exc)
    return str(exc) or type(exc).__name__, "internal"


# -- painting one job ----------------------------------------------------------------------------------------------
class JobHooks:
    """What a runner may add around :func:`run_job` (metrics, a stop flag). The defaults do nothing."""

    def should_stop(self) -> bool:
        return False

    def stage_changed(self, before: JobInfo, after: JobInfo) -> None:
        pass

    def ended(self, info: JobInfo | None, seconds: float) -> None:
        """``info`` None: the job was cancelled."""


def run_job(store: JobStore, job_id: str, runner: Runner, hooks: JobHooks | None = None) -> JobInfo | None:
    """Paint one queued job and record how it ended. Every path leaves the job done, failed or deleted; nothing
    escapes but BaseExceptions. Returns the final state, or None when the job was cancelled or already gone."""
    hooks = hooks or JobHooks()
    t0 = time.monotonic()
    try:
        info = store.load(job_id)
    except UnknownJobError:
        return None  # cancelled or expired before a painter got to it
    if info.over:
        return info
    try:
        final = _paint(store, info, runner, hooks)
    except Exception as exc:  # a broken store must not take the painter with it
        log.exception("job %s: recording its outcome failed", job_id)
        final = failed(info, *failure(exc, job_id))
        try:
            store.update(final)
        except Exception:
            log.exception("job %s: even the failure could not be recorded", job_id)
    finally:
        try:
            store.release_input(job_id)
        except OSError:
            log.exception("job %s: its input could not be removed", job_id)
    hooks.ended(final, time.monotonic() - t0)
    return final


def _paint(store: JobStore, info: JobInfo, runner: Runner, hooks: JobHooks) -> JobInfo | None:
    request = store.request(info.id)
    if request is None:
        final = failed(info, "the picture expired before a painter was free", "busy")
        return final if store.update(final) else None
    info = started(info)
    if not store.update(info):
        return None

    def progress(stage: str, fraction: float, frame: tuple[int, int] | None = None) -> None:
        nonlocal info
        if hooks.should_stop():
            raise JobInterrupted(info.id)
        before, info = info, advanced(info, stage, fraction, frame)
        if before.stage != stage:
            hooks.stage_changed(before, info)
        if not store.update(info):
            raise JobCancelled(info.id)  # deleted by its client while painting: stop, write nothing

    try:
        out = runner(request, progress)
        store.save_result(info.id, out.png)
        done = finished(info, out)
        hooks.stage_changed(info, done)
        if not store.update(done):
            raise JobCancelled(info.id)
        return done
    except JobCancelled:
        _forget(store, info.id)
        return None
    except JobInterrupted:
        final = failed(info, INTERRUPTED, "busy")
        return final if store.update(final) else None
    except Exception as exc:  # every failure becomes a reason on the job, never a dead painter
        final = failed(info, *failure(exc, info.id), retry_at=getattr(exc, "retry_at", None))
        if not store.update(final):
            _forget(store, info.id)
            return None
        return final


def _forget(store: JobStore, job_id: str) -> None:
    try:
        store.delete(job_id)
    except UnknownJobError:
        pass


def paint_runner(settings: Settings) -> Runner:
    """The real work: the shared painter for the style, then a clean PNG."""

    def run(request: JobRequest, progress: Progress) -> PaintOutput:
        from anipaint import get_painter, imaging
        from anipaint.warmup import painting

        def relay(stage: str, fraction: float) -> None:
            if stage != "done":  # the job is done once its PNG is stored, not when the painter returns
                progress(stage, fraction)

        painter = get_painter(request.style, settings)
        if clips.clip_of(request.data):
            with painting():
                return _paint_clip(painter, request, progress, settings)
        with painting():  # the background warm-up pauses while the server paints
            result = painter.paint_result(rewound(request.data), request.options, progress=relay)
        img = result.image
        progress("encode", 0.97)
        return PaintOutput(imaging.encode_png(img), img.width, img.height, result.faces_found or 0, result.engine)

    return run


def _paint_clip(painter, request: JobRequest, progress: Progress, settings: Settings) -> PaintOutput:
    """A video or animated picture: progress counts frames, the result is the clip."""

    def on_frame(done: int, total: int) -> None:
        share = done / total if total else 0.5 * (1 - 1 / (1 + done / 25))  # no count: creep towards half
        progress("paint", 0.02 + 0.95 * min(1.0, share), (done, total))

    progress("decode", 0.01, (0, 0))
    out = clips.paint_clip(painter, request.data, request.options, settings, on_frame)
    return PaintOutput(out.data, out.width, out.height, 0, painter.engine.backend_name, out.media_type, out.frames)
