"""What a failed download on first use leaves behind: why it failed, and when the next try is due.

A server that cannot reach a style's origin (a company firewall, a mirror that is down) must neither try again on
every request nor say "converting" for ever. So a style's failed first-use download writes
``<home>/failed-downloads/<style-id>.json``, which every process sharing the home reads: the server and its
background warm-up, Celery workers on the same home, the CLI. Until the next try is due, a paint of the style fails
at once with the same reason (no network, no lock); the wait starts at ``settings.download_retry`` seconds and
doubles with each failure, up to an hour. A download that succeeds, on first use or through
`anipaint models fetch`, removes the record.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from anipaint.models.registry import Style
from anipaint.settings import Settings

LONGEST_WAIT = 3600.0


@dataclass(frozen=True)
class FailedDownload:
    why: str  # a short clause: "HTTP 503 from mirror.example", "cannot reach github.com: …"
    lasting: bool  # the origin said the file is not there (or sent another file): waiting alone will not help
    failures: int  # failed tries in a row
    failed_at: float  # Unix times
    retry_at: float

    def due(self, now: float | None = None) -> bool:
        return (time.time() if now is None else now) >= self.retry_at

    def seconds_left(self, now: float | None = None) -> int:
        """Whole seconds until the next try is due (at least 1: for a Retry-After header)."""
        return max(1, int(self.retry_at - (time.time() if now is None else now) + 0.999))

    def retry_clock(self) -> str:
        return time.strftime("%H:%M:%S UTC", time.gmtime(self.retry_at))

    def summary(self) -> str:
        """What a style's state says: ``download failed: <why>, retry at <time>`` (or "on next use", once due)."""
        when = "tried again on next use" if self.due() else f"retry at {self.retry_clock()}"
        return f"download failed: {self.why}, {when}"


def _path(style: Style, settings: Settings) -> Path:
    return settings.home / "failed-downloads" / f"{style.id}.json"


def load(style: Style, settings: Settings) -> FailedDownload | None:
    """The style's last failed download on first use, if no download has succeeded since."""
    try:
        return FailedDownload(**json.loads(_path(style, settings).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def pending(style: Style, settings: Settings) -> FailedDownload | None:
    """The failure that still holds back the style's next download, or None when a try may go ahead."""
    failed = load(style, settings)
    return failed if failed is not None and not failed.due() else None


def record(style: Style, settings: Settings, why: str, *, lasting: bool) -> FailedDownload:
    """Note one more failed try, and when the next one is due."""
    before = load(style, settings)
    failures = before.failures + 1 if before is not None else 1
    now = time.time()
    wait = min(LONGEST_WAIT, max(0.0, settings.download_retry) * 2 ** (failures - 1))
    failed = FailedDownload(why=why, lasting=lasting, failures=failures, failed_at=now, retry_at=now + wait)
    path = _path(style, settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(failed)))
    os.replace(tmp, path)
    return failed


def clear(style: Style, settings: Settings) -> None:
    _path(style, settings).unlink(missing_ok=True)
