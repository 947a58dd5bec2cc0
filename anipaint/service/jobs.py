"""The job queue: a fixed number of painter threads and a fixed number of waiting slots.

:class:`JobQueue` is the interface the HTTP layer talks to. :class:`LocalJobQueue` runs jobs on threads in this
process; a Celery-backed queue can implement the same protocol later (submit → task id, get → the task's state
and progress meta, result_path → shared storage, cancel → revoke) without touching the routes.

A job is never silently lost: once ``submit`` has returned, the job ends ``done`` with a PNG on disk or
``failed`` with a reason, unless the caller cancels it. Finished jobs and their files expire after
``settings.result_ttl`` seconds; a sweeper thread removes them (and leftovers of earlier runs at start).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal, Protocol

from anipaint.errors import ImageError, StyleError
from anipaint.settings import Settings

log = logging.getLogger("anipaint.service")

JobState = Literal["queued", "running", "done", "failed"]
Progress = Callable[[str, float], None]
_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")


@dataclass(frozen=True)
class JobRequest:
    """What to paint. ``style`` is a resolved style id; ``max_side`` None means full resolution."""

    data: bytes
    style: str
    faces: bool | None = None
    max_side: int | None = 512
    name: str = "image"
    strength: float = 1.0  # 0: the photo, 1: the full style


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
    error_kind: str | None = None  # image | style | busy | internal: lets /predict pick an HTTP status
    width: int | None = None
    height: int | None = None
    created: float = 0.0
    started: float | None = None
    finished: float | None = None

    def public(self) -> dict:
        keys = ("id", "status", "stage", "progress", "position", "error", "error_kind", "style", "width", "height")
        return {k: getattr(self, k) for k in keys}


class QueueFullError(Exception):
    """Every painter is busy and every waiting slot is taken."""

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


class QueueObserver(Protocol):
    def stage_done(self, stage: str, seconds: float) -> None: ...
    def job_done(self, outcome: str) -> None: ...


class JobQueue(Protocol):
    """What the web service needs from a queue, local or remote."""

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def submit(self, request: JobRequest) -> JobInfo: ...  # raises QueueFullError
    def get(self, job_id: str) -> JobInfo: ...  # raises UnknownJobError
    def result_path(self, job_id: str) -> Path: ...  # raises UnknownJobError, JobNotDoneError
    def cancel(self, job_id: str) -> JobInfo: ...  # raises UnknownJobError; forgets the job
    def depth(self) -> int: ...  # jobs waiting for a painter
    def running(self) -> int: ...
    def retry_after(self) -> int: ...  # seconds a rejected client should wait


Runner = Callable[[JobRequest, Progress], "PaintOutput"]


@dataclass(frozen=True)
class PaintOutput:
    png: bytes
    width: int
    height: int


def finished(info: JobInfo, out: PaintOutput) -> JobInfo:
    """The state of a job whose picture is painted (local and Celery queues alike)."""
    return replace(
        info, status="done", stage="done", progress=1.0, width=out.width, height=out.height, finished=time.time()
    )


def paint_runner(settings: Settings) -> Runner:
    """The real work: the shared painter for the style, then a clean PNG."""

    def run(request: JobRequest, progress: Progress) -> PaintOutput:
        from anipaint import get_painter, imaging

        def relay(stage: str, fraction: float) -> None:
            if stage != "done":  # the job is done once its PNG is written, not when the painter returns
                progress(stage, fraction)

        painter = get_painter(request.style, settings)
        img = painter.paint(
            request.data, max_side=request.max_side, faces=request.faces, strength=request.strength, progress=relay
        )
        progress("encode", 0.97)
        return PaintOutput(imaging.encode_png(img), img.width, img.height)

    return run


@dataclass
class _Job:
    info: JobInfo
    request: JobRequest | None
    cancelled: bool = False
    stage_started: float = field(default_factory=time.monotonic)


def _error_kind(exc: BaseException) -> str:
    if isinstance(exc, ImageError):
        return "image"
    if isinstance(exc, StyleError):
        return "style"
    return "internal"


class LocalJobQueue:
    """Jobs painted by ``settings.jobs`` threads in this process, ``settings.queue_size`` waiting at most."""

    def __init__(self, settings: Settings, runner: Runner | None = None, observer: QueueObserver | None = None) -> None:
        self.settings = settings
        self.workers = max(1, settings.jobs)
        self.slots = max(0, settings.queue_size)
        self.ttl = float(settings.result_ttl)
        self.dir = Path(settings.jobs_dir)
        self._run = runner or paint_runner(settings)
        self._observer = observer
        self._jobs: dict[str, _Job] = {}
        self._waiting: deque[str] = deque()
        self._busy = 0
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._durations: deque[float] = deque(maxlen=20)

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.sweep()
        for i in range(self.workers):
            t = threading.Thread(target=self._work, name=f"anipaint-painter-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        t = threading.Thread(target=self._sweep_loop, name="anipaint-sweeper", daemon=True)
        t.start()
        self._threads.append(t)

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        with self._cond:
            for job_id in list(self._waiting):
                self._finish(self._jobs[job_id], error="the server is shutting down", kind="busy")
            self._waiting.clear()
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout)

    # -- the protocol ------------------------------------------------------------------------------------------
    def submit(self, request: JobRequest) -> JobInfo:
        with self._cond:
            if self._stopping.is_set():
                raise QueueFullError("the server is shutting down", self.retry_after())
            if self._busy + len(self._waiting) >= self.workers + self.slots:
                raise QueueFullError(
                    f"all {self.workers} painter(s) are busy and {self.slots} job(s) are waiting",
                    self.retry_after(),
                )
            job_id = secrets.token_urlsafe(18)
            info = JobInfo(id=job_id, status="queued", style=request.style, created=time.time())
            self._jobs[job_id] = _Job(info, request)
            self._waiting.append(job_id)
            self._cond.notify()
            return self._snapshot(self._jobs[job_id])

    def get(self, job_id: str) -> JobInfo:
        with self._cond:
            job = self._jobs.get(job_id)
            if job is not None:
                return self._snapshot(job)
        return self._from_disk(job_id)

    def result_path(self, job_id: str) -> Path:
        info = self.get(job_id)
        if info.status != "done":
            raise JobNotDoneError(info)
        path = self._png(job_id)
        if not path.is_file():
            raise UnknownJobError(job_id)
        return path

    def cancel(self, job_id: str) -> JobInfo:
        with self._cond:
            job = self._jobs.get(job_id)
            if job is not None:
                info = self._snapshot(job)
                if info.status == "queued":
                    self._waiting.remove(job_id)
                    self._count("cancelled")
                elif info.status == "running":
                    job.cancelled = True  # the worker stops at the next progress report and drops the result
                del self._jobs[job_id]
        if job is None:
            info = self._from_disk(job_id)
        self._remove_files(job_id)
        return info

    def depth(self) -> int:
        with self._cond:
            return len(self._waiting)

    def running(self) -> int:
        with self._cond:
            return self._busy

    def retry_after(self) -> int:
        avg = sum(self._durations) / len(self._durations) if self._durations else 5.0
        rounds = math.ceil((len(self._waiting) + 1) / self.workers)
        return int(min(120, max(1, math.ceil(avg * rounds))))

    # -- expiry ------------------------------------------------------------------------------------------------
    def sweep(self) -> int:
        """Forget finished jobs older than the TTL and delete expired files. Returns how many files went."""
        now = time.time()
        with self._cond:
            for job_id, job in list(self._jobs.items()):
                if job.info.finished is not None and now - job.info.finished >= self.ttl:
                    del self._jobs[job_id]
        removed = 0
        try:
            entries = list(os.scandir(self.dir))
        except FileNotFoundError:
            return 0
        for entry in entries:
            try:
                if entry.is_file() and now - entry.stat().st_mtime >= self.ttl:
                    job_id = entry.name.split(".", 1)[0]
                    with self._cond:
                        live = job_id in self._jobs
                    if not live:
                        os.unlink(entry.path)
                        removed += 1
            except FileNotFoundError:
                continue
        return removed

    def _sweep_loop(self) -> None:
        interval = min(60.0, max(0.25, self.ttl / 4))
        while not self._stopping.wait(interval):
            try:
                self.sweep()
            except Exception:  # the sweeper must outlive any one bad file
                log.exception("sweeping %s failed", self.dir)

    # -- workers -----------------------------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._stopping.is_set():
                    self._cond.wait()
                if self._stopping.is_set():
                    return
                job = self._jobs[self._waiting.popleft()]
                job.info = replace(job.info, status="running", stage="starting", started=time.time())
                job.stage_started = time.monotonic()
                self._busy += 1
                request = job.request
            self._observe_stage("queue", job.info.started - job.info.created)
            try:
                self._paint(job, request)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def _paint(self, job: _Job, request: JobRequest | None) -> None:
        t0 = time.monotonic()

        def progress(stage: str, fraction: float) -> None:
            if job.cancelled or self._stopping.is_set():
                raise JobCancelled
            with self._cond:
                if stage != job.info.stage:
                    now = time.monotonic()
                    self._observe_stage(job.info.stage, now - job.stage_started)
                    job.stage_started = now
                progress_ = min(1.0, max(job.info.progress, float(fraction)))
                job.info = replace(job.info, stage=stage, progress=progress_)

        try:
            if request is None:
                raise RuntimeError("the job lost its picture")
            out = self._run(request, progress)
            if job.cancelled:
                raise JobCancelled
            self._write_result(job, out)
        except JobCancelled:
            with self._cond:
                self._count("cancelled")
                job.request = None
            self._remove_files(job.info.id)
            return
        except Exception as exc:  # every failure becomes a reason on the job, never a dead thread
            if _error_kind(exc) == "internal":
                log.exception("job %s failed", job.info.id)
            with self._cond:
                self._finish(job, error=str(exc) or type(exc).__name__, kind=_error_kind(exc))
            return
        with self._cond:
            self._observe_stage(job.info.stage, time.monotonic() - job.stage_started)
            self._durations.append(time.monotonic() - t0)
            job.info = finished(job.info, out)
            job.request = None
            self._count("done")
            self._cond.notify_all()
        self._write_meta(job.info)
        if job.cancelled:  # cancelled while the file was being written
            self._remove_files(job.info.id)

    def _finish(self, job: _Job, *, error: str, kind: str) -> None:
        """Mark a job failed (caller holds the lock)."""
        job.info = replace(job.info, status="failed", error=error, error_kind=kind, finished=time.time())
        job.request = None
        self._count("failed")
        self._cond.notify_all()

    # -- storage -----------------------------------------------------------------------------------------------
    def _png(self, job_id: str) -> Path:
        return self.dir / f"{job_id}.png"

    def _write_result(self, job: _Job, out: PaintOutput) -> None:
        tmp = self.dir / f"{job.info.id}.png.tmp"
        tmp.write_bytes(out.png)
        os.replace(tmp, self._png(job.info.id))

    def _write_meta(self, info: JobInfo) -> None:
        tmp = self.dir / f"{info.id}.json.tmp"
        tmp.write_text(json.dumps(asdict(info)))
        os.replace(tmp, self.dir / f"{info.id}.json")

    def _from_disk(self, job_id: str) -> JobInfo:
        """A finished job from an earlier process (or one forgotten from memory) that has not expired."""
        if not _ID.match(job_id):
            raise UnknownJobError(job_id)
        try:
            info = JobInfo(**json.loads((self.dir / f"{job_id}.json").read_text()))
        except (OSError, ValueError, TypeError):
            raise UnknownJobError(job_id) from None
        if info.finished is None or time.time() - info.finished >= self.ttl or not self._png(job_id).is_file():
            raise UnknownJobError(job_id)
        return info

    def _remove_files(self, job_id: str) -> None:
        if _ID.match(job_id):
            for suffix in (".png", ".json", ".png.tmp", ".json.tmp"):
                (self.dir / f"{job_id}{suffix}").unlink(missing_ok=True)

    # -- helpers (caller holds the lock) -----------------------------------------------------------------------
    def _snapshot(self, job: _Job) -> JobInfo:
        if job.info.status == "queued":
            try:
                return replace(job.info, position=self._waiting.index(job.info.id) + 1)
            except ValueError:
                pass
        return replace(job.info, position=0)

    def _count(self, outcome: str) -> None:
        if self._observer is not None:
            self._observer.job_done(outcome)

    def _observe_stage(self, stage: str, seconds: float) -> None:
        if self._observer is not None and stage not in ("starting", "done"):
            self._observer.stage_done(stage, max(0.0, seconds))
