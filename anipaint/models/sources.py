"""Where a style's original files are: the sources folder, earlier downloads, or their download address.

``locate_source`` finds a file already on this machine; ``fetch_source`` downloads one from its public origin (or
``settings.mirror``) into ``<home>/downloads``, resumed and checked against its sha256
(:mod:`anipaint.models.downloads`). Fetching a whole style and converting what was fetched is
:mod:`anipaint.models.fetch`'s job.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from anipaint.errors import ModelStoreError
from anipaint.models import downloads
from anipaint.models.downloads import sha256_file
from anipaint.models.registry import Source, Style, all_styles
from anipaint.settings import Settings, get_settings


def _settings(settings: Settings | None) -> Settings:
    return settings if settings is not None else get_settings()


def locate_source(source: Source, settings: Settings | None = None) -> Path | None:
    """The first existing copy of a source file: the sources folder, then the downloads folder."""
    s = _settings(settings)
    for root in (s.sources, s.home / "downloads"):
        candidate = Path(root) / source.path
        if candidate.is_file():
            return candidate
    return None


def source_url(source: Source, settings: Settings | None = None) -> str | None:
    """Where a source file is downloaded from: ``settings.mirror`` + its relative path, else its public origin."""
    s = _settings(settings)
    if s.mirror:
        return f"{s.mirror.rstrip('/')}/{urllib.parse.quote(source.path)}"
    return source.url


def downloadable(style: Style, settings: Settings | None = None) -> bool:
    return all(source_url(src, settings) for src in style.sources)


def fetch_source(source: Source, settings: Settings | None = None, *, url: str | None = None,
                 timeout: float | None = None, progress: downloads.Progress | None = None) -> Path:
    """One source file, from the sources folder if it is there and intact, else downloaded into
    ``<home>/downloads`` (resumed, checked against its sha256; see :mod:`anipaint.models.downloads`). ``timeout``:
    seconds without a byte before giving up (default: ``settings.download_timeout``)."""
    s = _settings(settings)
    here = locate_source(source, s)
    if here is not None and url is None and (source.sha256 is None or sha256_file(here) == source.sha256):
        return here
    address = url or source_url(source, s)
    if not address:
        raise ModelStoreError(
            f"{source.path}: no public origin is known for this file; put it in {s.sources} "
            "or set ANIPAINT_MIRROR to a server holding it"
        )
    return downloads.download(address, s.home / "downloads" / source.path, sha256=source.sha256,
                              timeout=s.download_timeout if timeout is None else timeout, progress=progress)


def style_for_file(path: Path) -> str | None:
    """The registry style whose source file has this name (``paprika.pt`` → ``v2-paprika``), if exactly one."""
    name = Path(path).name
    matches = [st.id for st in all_styles() if len(st.sources) == 1 and Path(st.sources[0].path).name == name]
    return matches[0] if len(matches) == 1 else None
