"""The temporary folders strip executors keep their layer files in: created per paint, swept after a crash.

Each paint gets ``anipaint-stream-<pid>-<random>`` under the scratch folder (``ANIPAINT_SCRATCH_DIR``, default the
system temp folder), removed on every exit path of the paint. A process that is killed can't remove its own, so
:func:`sweep_orphaned_scratch` (called at start-up) removes the folders whose process no longer exists.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from anipaint.errors import ScratchSpaceError

from .sources import WHAT_TO_DO

PREFIX = "anipaint-stream-"
_NAME = re.compile(rf"^{PREFIX}(\d+)-")


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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def sweep_orphaned_scratch(folder: str | Path | None = None) -> list[Path]:
    """Remove the scratch folders under ``folder`` (default: the temp folder) left by processes that died.

    Folders of live processes (this one included) are kept. Returns the folders removed.
    """
    root = Path(folder or tempfile.gettempdir())
    removed = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = _NAME.match(entry.name)
        if match and entry.is_dir() and not entry.is_symlink() and not _alive(int(match.group(1))):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed
