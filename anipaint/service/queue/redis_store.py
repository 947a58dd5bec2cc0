"""The scaled-out queue's :class:`~anipaint.service.queue.jobs.JobStore`: every job's state in Redis, and its picture
and result in Redis too or, with an object store (:mod:`.object_store`), there, so that Redis holds only state.
Web processes and workers on different machines share them without a shared disk.

Keys ``anipaint:job:<id>:{info,input,options,result}`` expire after ``settings.result_ttl`` (``input`` and
``result`` are objects instead when there is an object store). Only ``create``
makes a job; ``update`` never brings back a job its client deleted meanwhile (SET XX), which is how a worker
learns of a cancel. ``anipaint:waiting`` lists queued ids in arrival order; ``anipaint:running`` holds the ids
being painted; ``anipaint:owner:<owner>`` the ids of one API key's unfinished jobs.
"""

from __future__ import annotations

import json
from pathlib import Path

from anipaint.service.queue.file_store import write_atomic
from anipaint.service.queue.jobs import JOB_ID, JobInfo, JobRequest, QueueFullError, UnknownJobError
from anipaint.service.queue.object_store import ObjectStore, ObjectStoreUnavailable
from anipaint.service.uploads import whole

PREFIX = "anipaint:job:"
WAITING = "anipaint:waiting"
RUNNING = "anipaint:running"
_PARTS = ("info", "input", "options", "result")


def owner_key(owner: str) -> str:
    return f"anipaint:owner:{owner}"


def connect(url: str):
    import redis

    return redis.Redis.from_url(url)


class RedisJobStore:
    def __init__(self, client, ttl: float, cache: Path, blobs: ObjectStore | None = None, wait: float = 0.0) -> None:
        self.r = client
        self.ttl = max(1, int(ttl))
        self.cache = Path(cache)  # results fetched by the web process, to stream them from a file
        self.blobs = blobs
        self.wait = wait  # how long a painter waits for an unreachable store before failing its job

    def _key(self, job_id: str, part: str = "info") -> str:
        if not JOB_ID.match(job_id):
            raise UnknownJobError(job_id)
        return f"{PREFIX}{job_id}:{part}"

    def create(self, info: JobInfo, request: JobRequest) -> None:
        pipe = self.r.pipeline()
        if self.blobs is None:
            pipe.set(self._key(info.id, "input"), whole(request.data), ex=self.ttl)
        pipe.set(self._key(info.id, "options"), json.dumps(request.to_json()), ex=self.ttl)
        pipe.set(self._key(info.id), json.dumps(info.to_json()), ex=self.ttl, nx=True)
        pipe.execute()
        if self.blobs is not None:  # after the job's key, so that a sweep never takes an upload for an orphan
            try:
                self.blobs.put(self.blobs.key(info.id, "input"), request.data)
            except ObjectStoreUnavailable as exc:
                self.r.delete(self._key(info.id), self._key(info.id, "options"))
                raise QueueFullError(f"{exc}; try again shortly", 10) from None

    def load(self, job_id: str) -> JobInfo:
        raw = self.r.get(self._key(job_id))
        if raw is None:
            raise UnknownJobError(job_id)
        return JobInfo.from_json(json.loads(raw))

    def update(self, info: JobInfo) -> bool:
        return bool(self.r.set(self._key(info.id), json.dumps(info.to_json()), ex=self.ttl, xx=True))

    def request(self, job_id: str) -> JobRequest | None:
        if self.blobs is not None:
            options = self.r.get(self._key(job_id, "options"))
            key = self.blobs.key(job_id, "input")
            data = self.blobs.patiently(self.wait, self.blobs.get, key) if options is not None else None
        else:
            data, options = self.r.mget(self._key(job_id, "input"), self._key(job_id, "options"))
        if data is None:
            return None
        return JobRequest.from_json(json.loads(options or b"{}"), data)

    def save_result(self, job_id: str, png: bytes) -> None:
        if self.blobs is not None:
            self.blobs.patiently(self.wait, self.blobs.put, self.blobs.key(job_id, "result"), png)
        else:
            self.r.set(self._key(job_id, "result"), png, ex=self.ttl)

    def result_path(self, job_id: str) -> Path:
        path = self.cache / f"{job_id}.png"
        if not path.is_file():
            if self.blobs is not None:
                if not self.blobs.download(self.blobs.key(job_id, "result"), path):
                    raise UnknownJobError(job_id)
                return path
            data = self.r.get(self._key(job_id, "result"))
            if data is None:
                raise UnknownJobError(job_id)
            self.cache.mkdir(parents=True, exist_ok=True)
            write_atomic(path, data)
        return path

    def delete(self, job_id: str) -> JobInfo:
        info = self.load(job_id)
        pipe = self.r.pipeline()
        pipe.lrem(WAITING, 0, job_id)
        pipe.delete(*(self._key(job_id, p) for p in _PARTS))
        if info.owner:
            pipe.srem(owner_key(info.owner), job_id)
        pipe.execute()
        (self.cache / f"{job_id}.png").unlink(missing_ok=True)
        if self.blobs is not None:
            try:
                self.blobs.delete([self.blobs.key(job_id, "input"), self.blobs.key(job_id, "result")])
            except ObjectStoreUnavailable:
                pass  # the job is gone from Redis, so the next sweep removes its objects
        return info

    def release_input(self, job_id: str) -> None:
        if self.blobs is not None:
            self.blobs.delete([self.blobs.key(job_id, "input")])
        else:
            self.r.delete(self._key(job_id, "input"))

    def sweep(self) -> int:
        """Remove what belongs to jobs Redis no longer knows (past their TTL, deleted, or left by a crash): their
        objects, and this process's copies of their results. Returns how many files and objects went."""
        def known(job_id: str) -> bool:
            return bool(JOB_ID.match(job_id)) and bool(self.r.exists(self._key(job_id)))

        copies = [path for path in self.cache.glob("*.png") if not known(path.stem)]
        for path in copies:
            path.unlink(missing_ok=True)
        return len(copies) + (self.blobs.sweep(known) if self.blobs is not None else 0)
