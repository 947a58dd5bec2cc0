"""The same job queue, scaled out: Celery workers on any number of machines, Redis in the middle.

Set ``ANIPAINT_BROKER_URL=redis://host:6379/0`` for the web service and for every worker (``anipaint worker``).
The web service then paints nothing itself: :class:`CeleryJobQueue` admits each job into a
:class:`~anipaint.service.queue.redis_store.RedisJobStore` and sends Celery a task that names it; the task runs the
same :func:`~anipaint.service.queue.jobs.run_job` as the embedded queue's painter threads.

Why jobs are not lost: the task is acknowledged only after it finished (``acks_late``) and is put back if a
worker dies mid-paint (``reject_on_worker_lost``); a worker takes one task at a time (prefetch 1), so a busy
worker never hoards jobs that an idle one could start.

Each worker gets its machine ready as the embedded server does (:class:`~anipaint.warmup.Warmup`): it
paints at once on the plain engine while the styles are converted and their fast engines built and measured for
this machine's CPU in a low-priority child process, and its painters move onto those engines without a restart.
Workers sharing one model store share the builds (file locks); each job says which engine painted it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from pathlib import Path

from celery import Celery

from anipaint.models import availability
from anipaint.service.queue.jobs import (
    JobInfo,
    JobNotDoneError,
    JobRequest,
    QueueFullError,
    admitted,
    paint_runner,
    run_job,
)
from anipaint.service.queue.local import RESTARTING
from anipaint.service.queue.object_store import ObjectStore
from anipaint.service.queue.redis_store import RUNNING, WAITING, RedisJobStore, connect, owner_key
from anipaint.settings import Settings, get_settings
from anipaint.warmup import Warmup

log = logging.getLogger("anipaint.worker")

# Append a job id unless the waiting list is full; returns how many were waiting before it, or -1.
_ADMIT = """
local waiting = redis.call('LLEN', KEYS[1])
if waiting >= tonumber(ARGV[1]) then return -1 end
redis.call('RPUSH', KEYS[1], ARGV[2])
return waiting
"""


def _store(settings: Settings, client=None) -> RedisJobStore:
    cache = Path(settings.jobs_dir) / "remote"
    blobs = ObjectStore(settings.object_store) if settings.object_store else None
    return RedisJobStore(client or connect(settings.broker_url), settings.result_ttl, cache, blobs,
                         settings.object_store_wait)


def _sweep_now_and_then(store: RedisJobStore, every: float, stop: threading.Event) -> None:
    """Remove what belongs to jobs that are gone (results past their TTL, a crash's leftovers) at start and every
    ``every`` seconds."""
    while True:
        try:
            swept = store.sweep()
            if swept:
                log.info("removed %d files and objects of jobs that are gone", swept)
        except Exception:  # noqa: BLE001 - Redis or the store away: the next round tries again
            log.warning("the sweep failed; trying again later", exc_info=True)
        if stop.wait(every):
            return


def _start_sweeping(store: RedisJobStore, settings: Settings) -> threading.Event:
    """The sweep in a background thread, every quarter of the result TTL (at least a minute); set the event to stop."""
    stop = threading.Event()
    threading.Thread(target=_sweep_now_and_then, args=(store, max(60.0, settings.result_ttl / 4), stop),
                     name="anipaint-sweep", daemon=True).start()
    return stop


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
        # mid-paint loses no job. It must exceed the longest paint, or a slow job would run twice. Kombu looks for
        # such tasks only every interval × throttle seconds (100 by default), which would add up to 100 s to the
        # timeout; one look every quarter of it (at most 10 s) keeps the redelivery near the setting.
        broker_transport_options={
            "visibility_timeout": settings.redelivery_timeout,
            "unacked_restore_interval": max(1, min(10, settings.redelivery_timeout // 4)),
            "unacked_restore_throttle": 1,
        },
    )
    state: dict = {}

    @app.task(name="anipaint.paint")
    def paint(job_id: str) -> None:
        if "store" not in state:
            state["store"], state["runner"] = _store(settings), paint_runner(settings)
        paint_job(state["store"], job_id, state["runner"])

    return app


def paint_job(store: RedisJobStore, job_id: str, runner) -> JobInfo | None:
    """Worker side: one job through the shared life cycle, listed as running while it paints."""
    r = store.r
    r.lrem(WAITING, 0, job_id)
    r.sadd(RUNNING, job_id)
    try:
        final = run_job(store, job_id, runner)
    finally:
        r.srem(RUNNING, job_id)
    if final is not None and final.owner:
        r.srem(owner_key(final.owner), job_id)
    return final


class CeleryJobQueue:
    """:class:`~anipaint.service.queue.local.JobQueue` over Redis + Celery workers."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.celery = make_celery(settings)
        self.store = _store(settings)
        self.r = self.store.r
        self._admit = self.r.register_script(_ADMIT)
        self._draining = False
        self._stop_sweeping: threading.Event | None = None

    def start(self) -> None:
        self.r.ping()  # fail at start-up, not on the first upload, when Redis is unreachable
        self.store.cache.mkdir(parents=True, exist_ok=True)
        if self.store.blobs is not None:
            self.store.blobs.check()
        self._stop_sweeping = _start_sweeping(self.store, self.settings)  # its copies of results, and orphans

    def drain(self) -> None:
        self._draining = True

    def stop(self) -> None:
        if self._stop_sweeping is not None:
            self._stop_sweeping.set()
        self.r.close()

    def submit(self, request: JobRequest, owner: str | None = None) -> JobInfo:
        if self._draining:
            raise QueueFullError(RESTARTING, self.retry_after())
        info = admitted(request, position=0, owner=owner)
        # The bound is checked and the id appended in one server-side script, so web processes and workers
        # changing the list at the same moment can neither overfill it nor make the check fail.
        waiting = self._admit(keys=[WAITING], args=[max(0, self.settings.queue_size), info.id])
        if waiting < 0:
            raise QueueFullError("every painter is busy and the queue is full", self.retry_after())
        info = replace(info, position=int(waiting) + 1)
        try:
            self.store.create(info, request)
        except Exception:
            self.r.lrem(WAITING, 0, info.id)
            raise
        if owner:
            self.r.sadd(owner_key(owner), info.id)
            self.r.expire(owner_key(owner), self.store.ttl)
        self.celery.send_task("anipaint.paint", args=[info.id])
        return info

    def get(self, job_id: str) -> JobInfo:
        info = self.store.load(job_id)
        if info.status == "queued":
            pos = self.r.lpos(WAITING, job_id)
            info = replace(info, position=(int(pos) + 1) if pos is not None else 1)
        return info

    def result_path(self, job_id: str) -> Path:
        info = self.store.load(job_id)
        if info.status != "done":
            raise JobNotDoneError(info)
        return self.store.result_path(job_id)

    def cancel(self, job_id: str) -> JobInfo:
        return self.store.delete(job_id)

    def depth(self) -> int:
        return int(self.r.llen(WAITING))

    def running(self) -> int:
        return int(self.r.scard(RUNNING))

    def full(self) -> bool:
        return self._draining or self.depth() >= max(0, self.settings.queue_size)

    def owned(self, owner: str) -> int:
        return int(self.r.scard(owner_key(owner)))

    def retry_after(self) -> int:
        return 5

    def draining(self) -> bool:
        return self._draining

    def health(self) -> str | None:
        if self._draining:
            return RESTARTING
        try:
            self.r.ping()
        except Exception:
            return "the job broker (Redis) is unreachable"
        if self.store.blobs is not None:
            return self.store.blobs.reachable()
        return None


def worker_main(settings: Settings | None = None, concurrency: int | None = None, name: str | None = None) -> None:
    """`anipaint worker`: a Celery worker with threads sharing one loaded model per style."""
    s = settings or get_settings()
    if not s.broker_url:
        raise SystemExit("anipaint worker: set ANIPAINT_BROKER_URL (e.g. redis://localhost:6379/0)")
    _log_to_stderr(s.log_level)
    stop_sweeping = threading.Event()
    if s.object_store:
        store = _store(s)
        store.blobs.check()  # a missing bucket or refused credentials: one line, and no worker
        stop_sweeping = _start_sweeping(store, s)
    app = make_celery(s)
    n = concurrency or max(1, s.jobs)
    node = ["--hostname", name] if name else []
    background = _warm_up_in_background(s)
    try:
        _run_worker(app, n, node)
    finally:
        stop_sweeping.set()
        if background is not None:
            background.stop()


def _warm_up_in_background(settings: Settings) -> Warmup | None:
    """Start converting, building and measuring what this machine lacks, the default style first."""
    try:
        background = Warmup(settings)
        background.start(first=availability.resolve(None, settings).id)
        return background
    except Exception:  # noqa: BLE001 - the worker still paints; styles convert on first use
        log.exception("background warm-up could not start")
        return None


def _log_to_stderr(level: str) -> None:
    """Celery configures its own loggers only: show anipaint's (an engine moved, a build failed) beside them."""
    logger = logging.getLogger("anipaint")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(asctime)s: %(levelname)s/%(name)s] %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False  # Celery's root handler would print each line again
    level_no = logging.getLevelName(level.upper())
    logger.setLevel(level_no if isinstance(level_no, int) else logging.INFO)  # uvicorn's "trace": INFO


def _run_worker(app: Celery, concurrency: int, node: list[str]) -> None:
    app.worker_main(
        [
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            str(concurrency),
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
        + node
    )
