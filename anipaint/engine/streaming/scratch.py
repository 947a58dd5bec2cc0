"""The temporary folders strip executors keep their layer files in, one per paint.

Each paint gets ``anipaint-stream-<pid>-<random>`` under the scratch folder (``ANIPAINT_SCRATCH_DIR``, default the
system temp folder), removed on every exit path of the paint. A process that is killed can't remove its own: the
pid in the name lets :func:`anipaint.scratch.sweep` find the folders of processes that are gone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from anipaint.errors import ScratchSpaceError

from .sources import WHAT_TO_DO

PREFIX = "anipaint-stream-"


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
