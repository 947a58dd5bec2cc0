"""The embedded queue's :class:`~anipaint.service.queue.jobs.JobStore`: jobs in memory, persisted as files in the data
folder so that a restart finds every accepted job.

Per job: ``<id>.json`` (its state and options), ``<id>.input`` (the uploaded picture, until painted) and
``<id>.png`` (the result). Every file is written to ``<name>.tmp`` and renamed, and a failed write removes its
temporary file, so a full disk leaves no partial files. The state file is rewritten when the status changes, not
on every progress report. The sweeper deletes only files named like these, never anything else in the folder.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from pathlib import Path

from anipaint.service.queue.jobs import INTERRUPTED, JOB_ID, JobInfo, JobRequest, UnknownJobError, failed
from anipaint.service.uploads import UploadData, write_into

log = logging.getLogger("anipaint.service")
_SUFFIXES = (".json", ".input", ".png")
_OURS = re.compile(r"^(?P<id>[A-Za-z0-9_-]{24})\.(?:json|input|png)(?:\.tmp)?$")


def write_atomic(path: Path, data: UploadData) -> None:
    """``path`` holds ``data`` entirely or is left as it was; no temporary file survives a failure. A file object is
    copied in parts from its start."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as fh:
            write_into(fh, data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def check_writable(folder: Path) -> None:
    """Raise OSError unless a file can be created, written and removed in ``folder`` (created if missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / f".anipaint-probe-{os.getpid()}"
    try:
        write_atomic(probe, b"ok")
    finally:
        probe.unlink(missing_ok=True)


class FileJobStore:
    def __init__(self, folder: Path, ttl: float) -> None:
        self.dir = Path(folder)
        self.ttl = float(ttl)
        self._live: dict[str, JobInfo] = {}
        self._options: dict[str, dict] = {}
        self._saved_status: dict[str, str] = {}
        self._lock = threading.Lock()

    # -- the JobStore protocol ---------------------------------------------------------------------------------
    def create(self, info: JobInfo, request: JobRequest) -> None:
        with self._lock:
            try:
                self.dir.mkdir(parents=True, exist_ok=True)
                write_atomic(self._path(info.id, ".input"), request.data)
                self._persist(info, request.to_json())
            except BaseException:
                self._remove_files(info.id)
                raise
            self._live[info.id] = info
            self._options[info.id] = request.to_json()

    def load(self, job_id: str) -> JobInfo:
        with self._lock:
            info = self._live.get(job_id)
        return info if info is not None else self._from_disk(job_id)

    def update(self, info: JobInfo) -> bool:
        with self._lock:
            if info.id not in self._live:
                return False
            if self._saved_status.get(info.id) != info.status:
                try:
                    self._persist(info, self._options.get(info.id, {}))
                except BaseException:
                    # A state that is not on disk is not shown (a poller would take an unsaved "done" as
                    # final), except a failure: the job ends with it even unsaved, so nobody waits forever.
                    if info.status == "failed":
                        self._live[info.id] = info
                    raise
            self._live[info.id] = info
            return True

    def request(self, job_id: str) -> JobRequest | None:
        with self._lock:
            options = self._options.get(job_id)
        try:
            data = self._path(job_id, ".input").read_bytes()
        except FileNotFoundError:
            return None
        return JobRequest.from_json(options or {}, data)

    def save_result(self, job_id: str, png: bytes) -> None:
        write_atomic(self._path(job_id, ".png"), png)

    def result_path(self, job_id: str) -> Path:
        path = self._path(job_id, ".png")
        if not path.is_file():
            raise UnknownJobError(job_id)
        return path

    def delete(self, job_id: str) -> JobInfo:
        info = self.load(job_id)
        with self._lock:
            self._forget(job_id)
            self._remove_files(job_id)
        return info

    def release_input(self, job_id: str) -> None:
        if JOB_ID.match(job_id):
            self._path(job_id, ".input").unlink(missing_ok=True)

    # -- restarts and expiry -----------------------------------------------------------------------------------
    def recover(self) -> list[JobInfo]:
        """Jobs an earlier process accepted and did not finish: the queued ones (with their picture) come back
        queued, oldest first, for the caller to paint; the ones that were running fail with a reason."""
        queued = []
        for path in sorted(self.dir.glob("*.json")):
            if not _OURS.match(path.name):
                continue
            try:
                raw = json.loads(path.read_text())
                info, options = JobInfo.from_json(raw["info"]), raw.get("options", {})
            except (OSError, ValueError, TypeError, KeyError):
                continue
            if info.over:
                continue
            with self._lock:
                self._live[info.id], self._options[info.id] = info, options
                self._saved_status[info.id] = info.status
            if info.status == "queued" and self._path(info.id, ".input").is_file():
                queued.append(info)
            else:
                log.warning("job %s was %s when the server stopped: failed", info.id, info.status)
                self.update(failed(info, INTERRUPTED, "busy"))
                self.release_input(info.id)
        return sorted(queued, key=lambda i: i.created)

    def sweep(self) -> int:
        """Forget finished jobs older than the TTL and delete their files, and leftovers of ours that belong to no
        live job. Returns how many files went."""
        now = time.time()
        with self._lock:
            for job_id, info in list(self._live.items()):
                if info.finished is not None and now - info.finished >= self.ttl:
                    self._forget(job_id)
            live = {job_id for job_id, info in self._live.items() if not info.over or now - info.finished < self.ttl}
        removed = 0
        try:
            entries = list(os.scandir(self.dir))
        except FileNotFoundError:
            return 0
        for entry in entries:
            match = _OURS.match(entry.name)
            if match is None or match["id"] in live:
                continue
            try:
                if entry.name.endswith(".tmp") or self._expired(match["id"], entry, now):
                    os.unlink(entry.path)
                    removed += 1
            except FileNotFoundError:
                continue
        return removed

    # -- files -------------------------------------------------------------------------------------------------
    def _path(self, job_id: str, suffix: str) -> Path:
        if not JOB_ID.match(job_id):
            raise UnknownJobError(job_id)
        return self.dir / f"{job_id}{suffix}"

    def _persist(self, info: JobInfo, options: dict) -> None:
        """Caller holds the lock."""
        body = json.dumps({"info": info.to_json(), "options": options}).encode()
        write_atomic(self._path(info.id, ".json"), body)
        self._saved_status[info.id] = info.status

    def _from_disk(self, job_id: str) -> JobInfo:
        """A finished job from an earlier process (or one forgotten from memory) that has not expired."""
        try:
            info = JobInfo.from_json(json.loads(self._path(job_id, ".json").read_text())["info"])
        except (OSError, ValueError, TypeError, KeyError):
            raise UnknownJobError(job_id) from None
        if not info.over or time.time() - info.finished >= self.ttl:
            raise UnknownJobError(job_id)
        if info.status == "done" and not self._path(job_id, ".png").is_file():
            raise UnknownJobError(job_id)
        return info

    def _expired(self, job_id: str, entry: os.DirEntry, now: float) -> bool:
        try:
            info = JobInfo.from_json(json.loads(self._path(job_id, ".json").read_text())["info"])
        except (OSError, ValueError, TypeError, KeyError):
            return now - entry.stat().st_mtime >= self.ttl  # ours by name, but its state is gone
        if info.finished is None:  # a job this process failed but could not record: its file is stale
            return now - entry.stat().st_mtime >= self.ttl
        return now - info.finished >= self.ttl

    def _forget(self, job_id: str) -> None:
        self._live.pop(job_id, None)
        self._options.pop(job_id, None)
        self._saved_status.pop(job_id, None)

    def _remove_files(self, job_id: str) -> None:
        if JOB_ID.match(job_id):
            for suffix in _SUFFIXES:
                for name in (f"{job_id}{suffix}", f"{job_id}{suffix}.tmp"):
                    (self.dir / name).unlink(missing_ok=True)
