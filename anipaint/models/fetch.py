"""Getting a style's original files onto this machine: ``anipaint models fetch`` and ``anipaint models add``.

:func:`fetch_style` downloads a style's files (:func:`anipaint.models.sources.fetch_source`: resumed, checked against
their sha256) and :func:`add_local` takes one the user already has; both convert what they got when it has no published
checksum, through :func:`anipaint.models.store.convert_fetched`, so a file is only trusted once it converts. That is why
fetching sits above the store. :func:`fetch` does every style and the helper models' files at once.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from anipaint.errors import ModelStoreError
from anipaint.models import downloads, failed_downloads
from anipaint.models.downloads import sha256_file
from anipaint.models.registry import EXTRA_SOURCES, Source, Style, all_styles, get_style, style_id
from anipaint.models.sources import fetch_source
from anipaint.models.store import convert_fetched, convert_style
from anipaint.settings import Settings, get_settings


def _settings(settings: Settings | None) -> Settings:
    return settings if settings is not None else get_settings()


def fetch_style(style: Style, settings: Settings | None = None, *, url: str | None = None,
                timeout: float | None = None,
                progress: Callable[[Source], downloads.Progress | None] | None = None,
                convert: bool = False) -> list[Path]:
    """Every source file of a style (see :func:`~anipaint.models.sources.fetch_source`). Files without a published
    checksum are only trusted once they convert, so their style is converted now (``convert`` converts any style);
    a file that does not convert is deleted again, so a wrong file never makes a style look available."""
    s = _settings(settings)
    if url is not None and len(style.sources) != 1:
        raise ModelStoreError(f"{style.id} is built from {len(style.sources)} files; one --url can't name them")
    paths = [fetch_source(src, s, url=url, timeout=timeout, progress=progress(src) if progress else None)
             for src in style.sources]
    if convert or any(src.sha256 is None for src in style.sources):
        convert_fetched(style, paths, s, force=url is not None)
    failed_downloads.clear(style, s)  # the files are here now: first use no longer waits for a retry time
    return paths


def fetch(names: Iterable[str] | None = None, settings: Settings | None = None, *, timeout: float | None = None,
          progress: Callable[[Source], downloads.Progress | None] | None = None,
          on_result: Callable[[str, str], None] | None = None) -> dict[str, str]:
    """Download the given styles' files (none given: every style, the face detector and the other models).
    Returns {name: 'ok' | 'failed: why'}; one failure doesn't stop the rest."""
    s = _settings(settings)
    jobs: list[tuple[str, Callable[[], object]]] = []
    for style in [get_style(n) for n in style_ids(names)] if names else all_styles():
        jobs.append((style.id, functools.partial(fetch_style, style, s, timeout=timeout, progress=progress)))
    if not names:
        for name, source in EXTRA_SOURCES.items():
            jobs.append((name, functools.partial(fetch_source, source, s, timeout=timeout,
                                                 progress=progress(source) if progress else None)))
    results: dict[str, str] = {}
    for name, job in jobs:
        try:
            job()
            results[name] = "ok"
        except ModelStoreError as exc:
            results[name] = f"failed: {exc}"
        if on_result:
            on_result(name, results[name])
    return results


def style_ids(names: Iterable[str]) -> list[str]:
    """Style ids for user-given names (ids or aliases)."""
    return [style_id(n) for n in names]


def add_local(style_id: str, path: Path, settings: Settings | None = None) -> Path:
    """Use a file the user already has (e.g. the port's ``face_paint_512_v2.pt``) as a style's source.

    The file is copied next to the downloads (atomically) and converted; a file that does not convert is
    removed again, so a wrong file never makes a style look available.
    """
    s = _settings(settings)
    style = get_style(style_id)
    if len(style.sources) != 1:
        raise ModelStoreError(f"{style.id} is built from {len(style.sources)} files; put them in {s.sources}")
    src = Path(path).expanduser()
    if not src.is_file():
        raise ModelStoreError(f"{src}: no such file")
    source = style.sources[0]
    if source.sha256 is not None and sha256_file(src) != source.sha256:
        raise ModelStoreError(f"{src} is not the {style.id} source file (checksum differs)")
    dest = s.home / "downloads" / source.path
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dest)
    try:
        convert_style(style, s, force=True)
    except ModelStoreError:
        dest.unlink(missing_ok=True)
        raise
    return dest
