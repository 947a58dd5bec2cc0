"""The embedded queue: ``settings.jobs`` painter threads in this process, ``settings.queue_size`` waiting slots,
jobs kept in a :class:`~anipaint.service.queue.file_store.FileJobStore` so that a restart loses none of them. A job
whose style's files come on first use has them downloaded on a thread of its own (stage ``download``) before it
waits for a painter.

It implements :class:`~anipaint.service.queue.jobs.JobQueue`, the interface the HTTP layer talks to, as
:class:`~anipaint.service.queue.celery.CeleryJobQueue` does over Redis.
A painter thread survives anything a job does (the job fails with a reason) and
:meth:`LocalJobQueue.health` says why no painter can work when that happens.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from anipaint.errors import AnipaintError
from anipaint.models import store as model_store
from anipaint.models.registry import Style, get_style
from anipaint.painter import styles_used
from anipaint.service.queue.file_store import FileJobStore, check_writable
from anipaint.service.queue.jobs import (
    JobHooks,
    JobInfo,
    JobNotDoneError,
    JobQueue,
    JobRequest,
    QueueFullError,
    QueueObserver,
    Runner,
    UnknownJobError,
    admitted,
    failed,
    failure,
    paint_runner,
    run_job,
)
from anipaint.settings import Settings

log = logging.getLogger("anipaint.service")
RESTARTING = "the server is restarting"


class _Hooks(JobHooks):
    """Metrics and the stop flag around one job: the queue hands over its stop flag, where stage times and
    outcomes go, and the durations it estimates waits from."""

    def __init__(self, stopping: threading.Event, observe: Callable[[str, float], None],
                 count: Callable[[str], None], durations: deque[float]) -> None:
        self.stopping, self.observe, self.count, self.durations = stopping, observe, count, durations
        self.stage_started = time.monotonic()

    def should_stop(self) -> bool:
        return self.stopping.is_set()

    def stage_changed(self, before: JobInfo, after: JobInfo) -> None:
        now = time.monotonic()
        if before.stage == "starting" and before.started is not None:
            self.observe("queue", before.started - before.created)
        else:
            self.observe(before.stage, now - self.stage_started)
        self.stage_started = now

    def ended(self, info: JobInfo | None, seconds: float) -> None:
        self.count("cancelled" if info is None else "done" if info.status == "done" else "failed")
        if info is not None and info.status == "done":
            self.durations.append(seconds)


class LocalJobQueue:
    """Jobs painted by ``settings.jobs`` threads in this process, ``settings.queue_size`` waiting at most."""

    def __init__(self, settings: Settings, runner: Runner | None = None, observer: QueueObserver | None = None) -> None:
        self.settings = settings
        self.workers = max(1, settings.jobs)
        self.slots = max(0, settings.queue_size)
        self.store = FileJobStore(Path(settings.jobs_dir), settings.result_ttl)
        self._run = runner or paint_runner(settings)
        self._observer = observer
        self._waiting: deque[str] = deque()
        self._downloading: set[str] = set()  # jobs whose style files are being downloaded before they wait
        self._owners: dict[str, str] = {}  # job id → owner, while queued or running
        self._busy = 0
        self._cond = threading.Condition()
        self._draining = threading.Event()
        self._stopping = threading.Event()
        self._painters: list[threading.Thread] = []
        self._sweeper: threading.Thread | None = None
        self._durations: deque[float] = deque(maxlen=20)

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        check_writable(self.store.dir)
        for info in self.store.recover():
            self._waiting.append(info.id)
            if info.owner:
                self._owners[info.id] = info.owner
        if self._waiting:
            log.info("%d job(s) queued before the restart are painted now", len(self._waiting))
        self.store.sweep()
        for i in range(self.workers):
            t = threading.Thread(target=self._work, name=f"anipaint-painter-{i}", daemon=True)
            t.start()
            self._painters.append(t)
        self._sweeper = threading.Thread(target=self._sweep_loop, name="anipaint-sweeper", daemon=True)
        self._sweeper.start()

    def drain(self) -> None:
        with self._cond:
            self._draining.set()
            self._cond.notify_all()

    def stop(self, timeout: float = 5.0) -> None:
        """Interrupt running paints (they fail with a reason) and stop; queued jobs stay for the next start."""
        self._draining.set()
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        for t in [*self._painters, *([self._sweeper] if self._sweeper else [])]:
            t.join(timeout)

    # -- the protocol ------------------------------------------------------------------------------------------
    def submit(self, request: JobRequest, owner: str | None = None) -> JobInfo:
        downloads = self._downloads_first(request)
        with self._cond:
            if self._draining.is_set():
                raise QueueFullError(RESTARTING, self.retry_after())
            if self._busy + len(self._waiting) + len(self._downloading) >= self.workers + self.slots:
                raise QueueFullError(
                    f"all {self.workers} painter(s) are busy and {self.slots} job(s) are waiting",
                    self.retry_after(),
                )
            info = admitted(request, position=0 if downloads else len(self._waiting) + 1, owner=owner)
            if downloads:
                info = replace(info, stage="download")
            self.store.create(info, request)  # persisted before the client hears of it
            if owner:
                self._owners[info.id] = owner
            if downloads:
                self._downloading.add(info.id)
                threading.Thread(target=self._download_then_queue, args=(info.id, downloads),
                                 name="anipaint-download", daemon=True).start()
            else:
                self._waiting.append(info.id)
                self._cond.notify()
            return info

    def get(self, job_id: str) -> JobInfo:
        info = self.store.load(job_id)
        if info.status == "queued":
            with self._cond:
                try:
                    return replace(info, position=self._waiting.index(job_id) + 1)
                except ValueError:
                    pass
        return info

    def result_path(self, job_id: str) -> Path:
        info = self.get(job_id)
        if info.status != "done":
            raise JobNotDoneError(info)
        return self.store.result_path(job_id)

    def cancel(self, job_id: str) -> JobInfo:
        with self._cond:
            queued = job_id in self._waiting or job_id in self._downloading
            if job_id in self._waiting:
                self._waiting.remove(job_id)
            self._owners.pop(job_id, None)
        info = self.store.delete(job_id)  # a running paint notices at its next progress report
        if queued:
            self._count("cancelled")
        return info

    def depth(self) -> int:
        with self._cond:
            return len(self._waiting)

    def running(self) -> int:
        with self._cond:
            return self._busy

    def full(self) -> bool:
        with self._cond:
            taken = self._busy + len(self._waiting) + len(self._downloading)
            return self._draining.is_set() or taken >= self.workers + self.slots

    def owned(self, owner: str) -> int:
        with self._cond:
            return sum(1 for o in self._owners.values() if o == owner)

    def retry_after(self) -> int:
        avg = sum(self._durations) / len(self._durations) if self._durations else 5.0
        rounds = math.ceil((len(self._waiting) + 1) / self.workers)
        return int(min(120, max(1, math.ceil(avg * rounds))))

    def draining(self) -> bool:
        return self._draining.is_set()

    def health(self) -> str | None:
        if self._draining.is_set():
            return RESTARTING
        if self._painters and not any(t.is_alive() for t in self._painters):
            return "no painter is running"
        try:
            check_writable(self.store.dir)
        except OSError:
            return "the job folder is not writable"
        return None

    def sweep(self) -> int:
        return self.store.sweep()

    # -- downloads on first use, outside the painters -----------------------------------------------------------
    def _downloads_first(self, request: JobRequest) -> list[Style]:
        """The styles whose files must be downloaded before a painter can start this job."""
        if not self.settings.fetches_on_first_use:
            return []
        try:
            used = [get_style(style_id) for style_id in styles_used(request.options, self.settings)]
        except AnipaintError:  # the painter says what is wrong with the style
            return []
        return [style for style in used if model_store.needs_download(style, self.settings)]

    def _download_then_queue(self, job_id: str, styles: list[Style]) -> None:
        """A job's missing style files, downloaded on a thread of its own; then the job waits for a painter, or
        fails with the reason. A download that hangs or fails never holds a painter, nor the jobs behind it."""
        try:
            for style in styles:
                model_store.download_missing(style, self.settings)
        except Exception as exc:  # noqa: BLE001 - every failure becomes the job's reason
            reason, kind = failure(exc, job_id)
            with self._cond:
                self._downloading.discard(job_id)
                self._owners.pop(job_id, None)
            try:
                if self.store.update(failed(self.store.load(job_id), reason, kind, getattr(exc, "retry_at", None))):
                    self._count("failed")
            except UnknownJobError:  # cancelled meanwhile
                pass
            return
        with self._cond:
            self._downloading.discard(job_id)
            try:
                info = self.store.load(job_id)
            except UnknownJobError:  # cancelled meanwhile
                self._owners.pop(job_id, None)
                return
            self.store.update(replace(info, stage="queued", position=len(self._waiting) + 1))
            self._waiting.append(job_id)
            self._cond.notify()

    # -- painters ----------------------------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._cond:
                while (not self._waiting or self._draining.is_set()) and not self._stopping.is_set():
                    self._cond.wait()
                if self._stopping.is_set():
                    return
                job_id = self._waiting.popleft()
                self._busy += 1
            try:
                hooks = _Hooks(self._stopping, self._observe, self._count, self._durations)
                run_job(self.store, job_id, self._run, hooks)
            except Exception:  # run_job records every failure; this keeps the painter alive if that breaks too
                log.exception("painter: job %s", job_id)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._owners.pop(job_id, None)
                    self._cond.notify_all()

    def _sweep_loop(self) -> None:
        interval = min(60.0, max(0.25, self.store.ttl / 4))
        while not self._stopping.wait(interval):
            try:
                self.store.sweep()
            except Exception:  # the sweeper must outlive any one bad file
                log.exception("sweeping %s failed", self.store.dir)

    # -- helpers -----------------------------------------------------------------------------------------------
    def _count(self, outcome: str) -> None:
        if self._observer is not None:
            self._observer.job_done(outcome)

    def _observe(self, stage: str, seconds: float) -> None:
        if self._observer is not None and stage not in ("starting", "done"):
            self._observer.stage_done(stage, max(0.0, seconds))


def cancel_quietly(queue: JobQueue, job_id: str) -> None:
    try:
        queue.cancel(job_id)
    except UnknownJobError:
        pass
