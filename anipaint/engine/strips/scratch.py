"""Scratch space for the strips: temporary folders of layer files, owned per process so nothing outlives its process.

Each paint gets ``anipaint-strips-<pid>-<random>`` (:func:`scratch_folder`) under the scratch location
(``settings.scratch_dir``, ``ANIPAINT_SCRATCH_DIR``, or the system temp folder), removed on every exit path of the
paint. A long-running process (``anipaint serve`` / ``worker``) calls :func:`claim`: it gets its own folder
``anipaint-scratch-<pid>`` there and points its painters at it, so every per-paint folder lives inside it.
:func:`release` removes it on exit; at the next start :func:`sweep` removes the folders of processes that are gone
(killed, crashed), and per-paint folders left directly in the scratch location by processes that no longer run (by
the pid in their name, or, for unnamed ones, when untouched for ten minutes and not open in any process).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from anipaint.engine.strips.row_sources import WHAT_TO_DO
from anipaint.errors import ScratchSpaceError
from anipaint.settings import Settings

PREFIX = "anipaint-strips-"


def scratch_folder(folder: str | Path | None, need_bytes: int = 0) -> tempfile.TemporaryDirectory:
    """A fresh per-paint folder under ``folder``; a clear error when it can't be made or ``need_bytes`` won't fit."""
    where = Path(folder or tempfile.gettempdir())
    try:
        scratch = tempfile.TemporaryDirectory(prefix=f"{PREFIX}{os.getpid()}-", dir=folder)
    except OSError as exc:
        raise ScratchSpaceError(
            f"cannot create temporary files for full-resolution painting in {where} ({exc.strerror or exc}); "
            f"{WHAT_TO_DO}"
        ) from exc
    free = shutil.disk_usage(scratch.name).free
    if need_bytes > free:
        scratch.cleanup()
        raise ScratchSpaceError(
            f"not enough free disk for full-resolution painting: it needs {need_bytes / 1e9:.1f} GB of temporary "
            f"files at its widest point and {where} has {free / 1e9:.1f} GB free; {WHAT_TO_DO}"
        )
    return scratch


# Scratch a full-resolution paint holds at its peak, per picture pixel: two or three float16 layers of up to 64
# channels at full size (2–4 GB at 4096²), rounded up.
BYTES_PER_PIXEL = 320
UNNAMED_AGE = 600.0  # seconds; a live paint creates and removes a layer file in its folder far more often
_OWNED = re.compile(r"^anipaint-scratch-(?P<pid>\d+)$")
# A per-paint folder, with the pid where its maker named it ("anipaint-stream-" is what earlier releases wrote).
_PER_PAINT = re.compile(r"^anipaint-(?:strips|stream)-(?:(?P<pid>\d+)-)?")


def location(settings: Settings) -> Path:
    return Path(settings.scratch_dir) if settings.scratch_dir else Path(tempfile.gettempdir())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _in_use(folder: Path) -> bool:
    """Whether a running process has a file in ``folder`` open or mapped (Linux /proc; elsewhere: assume so)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    prefix = str(folder) + os.sep
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if any(prefix in line for line in (entry / "maps").read_text().splitlines()):
                return True
            for fd in (entry / "fd").iterdir():
                if os.readlink(fd).startswith(prefix):
                    return True
        except OSError:
            continue
    return False


def sweep(base: Path) -> list[Path]:
    """Remove scratch left by processes that no longer run; returns what went."""
    removed = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for entry in entries:
        owned = _OWNED.match(entry.name) or _PER_PAINT.match(entry.name)
        if owned is None or not entry.is_dir():
            continue
        if owned["pid"]:
            stale = int(owned["pid"]) != os.getpid() and not _alive(int(owned["pid"]))
        else:  # no owner named: only when untouched for a while and no running process has a file in it open
            stale = time.time() - entry.stat().st_mtime > UNNAMED_AGE and not _in_use(entry)
        if stale:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def claim(settings: Settings) -> Settings:
    """Sweep orphaned scratch, make this process's folder, and return settings whose painters use it."""
    base = location(settings)
    sweep(base)
    mine = base / f"anipaint-scratch-{os.getpid()}"
    shutil.rmtree(mine, ignore_errors=True)  # a dead process with our pid (a container's restart) left it
    mine.mkdir(parents=True, exist_ok=True)
    return dataclasses.replace(settings, scratch_dir=mine)


def release(settings: Settings) -> None:
    """Remove this process's scratch folder (what :func:`claim` made), whatever is left in it."""
    folder = settings.scratch_dir
    if folder is not None and _OWNED.match(Path(folder).name) and Path(folder).name.endswith(f"-{os.getpid()}"):
        shutil.rmtree(folder, ignore_errors=True)


def needed_bytes(width: int, height: int) -> int:
    return width * height * BYTES_PER_PIXEL


def free_bytes(settings: Settings) -> int:
    try:
        return shutil.disk_usage(location(settings)).free
    except OSError:
        return 0
