"""The embedded queue: ``settings.jobs`` painter threads in this process, ``settings.queue_size`` waiting slots,
jobs kept in a :class:`~anipaint.service.queue.file_store.FileJobStore` so that a restart loses none of them.

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
        with self._cond:
            if self._draining.is_set():
                raise QueueFullError(RESTARTING, self.retry_after())
            if self._busy + len(self._waiting) >= self.workers + self.slots:
                raise QueueFullError(
                    f"all {self.workers} painter(s) are busy and {self.slots} job(s) are waiting",
                    self.retry_after(),
                )
            info = admitted(request, position=len(self._waiting) + 1, owner=owner)
            self.store.create(info, request)  # persisted before the client hears of it
            self._waiting.append(info.id)
            if owner:
                self._owners[info.id] = owner
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
            queued = job_id in self._waiting
            if queued:
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
            return self._draining.is_set() or self._busy + len(self._waiting) >= self.workers + self.slots

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
