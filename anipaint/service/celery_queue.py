"""The same job queue, scaled out: Celery workers on any number of machines, Redis in the middle.

Set ``ANIPAINT_BROKER_URL=redis://host:6379/0`` for the web service and for every worker
(``anipaint worker``). The web service then paints nothing itself: :class:`CeleryJobQueue` implements the
:class:`~anipaint.service.jobs.JobQueue` protocol by keeping each job's state in Redis and sending Celery a task
that names the job. Pictures travel through Redis too (input and result keys expire after
``settings.result_ttl``), so workers need no shared disk.

Why jobs are not lost: the task is acknowledged only after it finished (``acks_late``) and is put back if a
worker dies mid-paint (``reject_on_worker_lost``); a worker takes one task at a time (prefetch 1), so a busy
worker never hoards jobs that an idle one could start.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, replace
from pathlib import Path

from celery import Celery

from anipaint.service.jobs import (
    JobCancelled,
    JobInfo,
    JobNotDoneError,
    JobRequest,
    PaintOutput,
    QueueFullError,
    UnknownJobError,
    _error_kind,
    finished,
    paint_runner,
)
from anipaint.settings import Settings, get_settings

_PREFIX = "anipaint:job:"
_WAITING = "anipaint:waiting"  # job ids in arrival order, removed when a worker starts them
_RUNNING = "anipaint:running"  # set of job ids being painted

# Append a job id unless the waiting list is full; returns how many were waiting before it, or -1.
_ADMIT = """
local waiting = redis.call('LLEN', KEYS[1])
if waiting >= tonumber(ARGV[1]) then return -1 end
redis.call('RPUSH', KEYS[1], ARGV[2])
return waiting
"""


def make_celery(settings: Settings) -> Celery:
    app = Celery("anipaint", broker=settings.broker_url, backend=None)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        # Redis holds an unacknowledged task this long before giving it to another worker: a worker that died
        # mid-paint loses no job. It must exceed the longest paint, or a slow job would run twice.
        broker_transport_options={"visibility_timeout": settings.redelivery_timeout},
    )

    @app.task(name="anipaint.paint")
    def paint(job_id: str) -> None:
        _run_job(job_id, settings)

    return app


def _redis(settings: Settings):
    import redis

    return redis.Redis.from_url(settings.broker_url)


def _key(job_id: str, part: str = "info") -> str:
    return f"{_PREFIX}{job_id}:{part}"


def _save(r, info: JobInfo, ttl: float, *, create: bool = False) -> bool:
    """Write a job's state. Only ``submit`` creates it; a worker's writes never bring back a job that the
    client deleted meanwhile (SET XX), which is how a worker learns of a cancel. False: the job is gone."""
    return bool(r.set(_key(info.id), json.dumps(asdict(info)), ex=max(1, int(ttl)), xx=not create))


def _load(r, job_id: str) -> JobInfo:
    raw = r.get(_key(job_id))
    if raw is None:
        raise UnknownJobError(job_id)
    return JobInfo(**json.loads(raw))


def _run_job(job_id: str, settings: Settings) -> None:
    """Worker side: paint one job and record its outcome; every exit path leaves done or failed."""
    r = _redis(settings)
    ttl = settings.result_ttl
    try:
        info = _load(r, job_id)
    except UnknownJobError:
        return  # cancelled or expired before a worker got to it
    data = r.get(_key(job_id, "input"))
    r.lrem(_WAITING, 0, job_id)
    if data is None:
        _save(
            r,
            replace(
                info,
                status="failed",
                error="the input expired before a painter was free",
                error_kind="busy",
                finished=time.time(),
            ),
            ttl,
        )
        return
    info = replace(info, status="running", stage="decode", started=time.time(), position=0)
    if not _save(r, info, ttl):
        return  # cancelled between the load above and now
    r.sadd(_RUNNING, job_id)
    request = JobRequest(**json.loads(r.get(_key(job_id, "request")) or b"{}"), data=data)

    def progress(stage: str, fraction: float) -> None:
        nonlocal info
        info = replace(info, stage=stage, progress=round(min(max(fraction, 0.0), 0.99), 3))
        if not _save(r, info, ttl):
            raise JobCancelled(job_id)  # deleted by the client while painting: stop, write nothing

    try:
        out: PaintOutput = paint_runner(settings)(request, progress)
        r.set(_key(job_id, "result"), out.png, ex=max(1, int(ttl)))
        done = _save(r, finished(info, out), ttl)
        if not done:
            raise JobCancelled(job_id)
    except JobCancelled:
        r.delete(_key(job_id, "result"))
    except Exception as exc:  # the job fails with a reason; the worker lives on
        _save(r, replace(info, status="failed", error=str(exc), error_kind=_error_kind(exc), finished=time.time()), ttl)
    finally:
        r.srem(_RUNNING, job_id)
        r.delete(_key(job_id, "input"))


class CeleryJobQueue:
    """:class:`~anipaint.service.jobs.JobQueue` over Redis + Celery workers."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.celery = make_celery(settings)
        self.r = _redis(settings)
        self.cache = Path(settings.jobs_dir) / "remote"
        self._admit = self.r.register_script(_ADMIT)

    def start(self) -> None:
        self.r.ping()  # fail at start-up, not on the first upload, when Redis is unreachable
        self.cache.mkdir(parents=True, exist_ok=True)

    def stop(self) -> None:
        self.r.close()

    def submit(self, request: JobRequest) -> JobInfo:
        # The bound is checked and the id appended in one server-side script, so web processes and workers
        # changing the list at the same moment can neither overfill it nor make the check fail.
        job_id = secrets.token_urlsafe(24)
        ttl = max(1, int(self.settings.result_ttl))
        waiting = self._admit(keys=[_WAITING], args=[max(0, self.settings.queue_size), job_id])
        if waiting < 0:
            raise QueueFullError("every painter is busy and the queue is full", self.retry_after())
        info = JobInfo(id=job_id, status="queued", style=request.style, position=int(waiting) + 1, created=time.time())
        meta = {"style": request.style, "faces": request.faces, "max_side": request.max_side, "name": request.name,
                "strength": request.strength}
        self.r.set(_key(job_id, "input"), request.data, ex=ttl)
        self.r.set(_key(job_id, "request"), json.dumps(meta), ex=ttl)
        _save(self.r, info, ttl, create=True)
        self.celery.send_task("anipaint.paint", args=[job_id])
        return info

    def get(self, job_id: str) -> JobInfo:
        info = _load(self.r, job_id)
        if info.status == "queued":
            pos = self.r.lpos(_WAITING, job_id)
            info = replace(info, position=(int(pos) + 1) if pos is not None else 1)
        return info

    def result_path(self, job_id: str) -> Path:
        info = _load(self.r, job_id)
        if info.status != "done":
            raise JobNotDoneError(info)
        path = self.cache / f"{job_id}.png"
        if not path.is_file():
            data = self.r.get(_key(job_id, "result"))
            if data is None:
                raise UnknownJobError(job_id)
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
        return path

    def cancel(self, job_id: str) -> JobInfo:
        info = _load(self.r, job_id)
        self.r.lrem(_WAITING, 0, job_id)
        self.r.delete(*(_key(job_id, p) for p in ("info", "input", "request", "result")))
        (self.cache / f"{job_id}.png").unlink(missing_ok=True)
        return info

    def depth(self) -> int:
        return int(self.r.llen(_WAITING))

    def running(self) -> int:
        return int(self.r.scard(_RUNNING))

    def retry_after(self) -> int:
        return 5

    def wait(self, job_id: str, timeout: float) -> JobInfo:
        deadline = time.monotonic() + timeout
        while True:
            info = self.get(job_id)
            if info.status in ("done", "failed") or time.monotonic() > deadline:
                return info
            time.sleep(0.1)


def worker_main(settings: Settings | None = None, concurrency: int | None = None, name: str | None = None) -> None:
    """`anipaint worker`: a Celery worker with threads sharing one loaded model per style."""
    s = settings or get_settings()
    if not s.broker_url:
        raise SystemExit("anipaint worker: set ANIPAINT_BROKER_URL (e.g. redis://localhost:6379/0)")
    app = make_celery(s)
    n = concurrency or max(1, s.jobs)
    node = ["--hostname", name] if name else []
    app.worker_main(
        [
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            str(n),
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
        + node
    )
