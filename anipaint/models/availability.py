"""Which styles this installation offers, which of them can paint here, and which one a name means.

Every front end asks this before a paint: the CLI, the web service, the painter. It joins three facts that live
below it: a style's licence (commercial-only mode offers only styles cleared for commercial use), whether the store
holds it converted (:mod:`anipaint.models.store`), and whether its original files are here or downloadable
(:mod:`anipaint.models.sources`). It is a module of its own, above the store, because none of this is the store's job:
the store converts what it is asked to convert and answers for its files; which style to paint with is a question about
the installation. It never downloads or converts; :func:`anipaint.models.store.ensure_converted` does, on first use.
"""

from __future__ import annotations

from dataclasses import dataclass

from anipaint.errors import LicenceError, StyleError
from anipaint.models import failed_downloads
from anipaint.models.failed_downloads import FailedDownload
from anipaint.models.registry import Style, all_styles, get_style, style_id
from anipaint.models.sources import downloadable, locate_source
from anipaint.models.store import is_converted, needs_download
from anipaint.settings import Settings, get_settings


@dataclass(frozen=True)
class StyleStatus:
    style: Style
    available: bool  # converted, or its sources are present and can be converted on first use
    converted: bool
    reason: str | None = None  # why not available
    needs_download: bool = False  # its files come on first use
    failed: FailedDownload | None = None  # its last download on first use failed


def _settings(settings: Settings | None) -> Settings:
    return settings if settings is not None else get_settings()


def offered(style: Style, settings: Settings | None = None) -> bool:
    """Whether this installation offers the style at all (commercial-only mode hides non-commercial weights)."""
    return style.licence.commercial or not _settings(settings).commercial_only


def refuse_unoffered(style: Style, settings: Settings | None = None) -> None:
    """Raise the one refusal every front end shows for a style its licence keeps out of commercial-only mode."""
    if not offered(style, settings):
        raise LicenceError(
            f"style {style.id!r} is refused: its licence ({style.licence.id}) does not allow commercial use, and "
            "this installation offers only styles cleared for commercial use (commercial-only mode)"
        )


def _usable(style: Style, s: Settings) -> bool:
    """Converted, its sources are here, or it downloads on first use (and its origin has not just said that the
    files are not there)."""
    if is_converted(style, s) or all(locate_source(src, s) for src in style.sources):
        return True
    return s.fetches_on_first_use and downloadable(style, s) and _held_back(style, s) is None


def _held_back(style: Style, s: Settings) -> FailedDownload | None:
    """A failed download whose origin said the files are not there, and whose retry time has not come yet."""
    failed = failed_downloads.load(style, s)
    return failed if _holds_back(failed) else None


def _holds_back(failed: FailedDownload | None) -> bool:
    return failed is not None and failed.lasting and not failed.due()


def download_pending(style: Style, settings: Settings | None = None) -> FailedDownload | None:
    """The failed download that holds back a paint of this style until its retry time, or None."""
    s = _settings(settings)
    return failed_downloads.pending(style, s) if needs_download(style, s) else None


def style_status(settings: Settings | None = None) -> list[StyleStatus]:
    """Every style this installation offers, with whether it can be used here, and why not."""
    s = _settings(settings)
    out: list[StyleStatus] = []
    for style in all_styles():
        if not offered(style, s):
            continue
        if is_converted(style, s):
            out.append(StyleStatus(style, True, True))
            continue
        missing = [src.path for src in style.sources if locate_source(src, s) is None]
        if missing and s.fetches_on_first_use and downloadable(style, s):
            failed = failed_downloads.load(style, s)
            reason = failed.summary() if failed else "downloads on first use"
            out.append(StyleStatus(style, not _holds_back(failed), False, reason, needs_download=True, failed=failed))
        elif missing:
            how = f" (`anipaint models fetch {style.id}`)" if downloadable(style, s) else ""
            out.append(StyleStatus(style, False, False, f"source missing: {', '.join(missing)}{how}"))
        else:
            out.append(StyleStatus(style, True, False, None))
    return out


def resolve(name: str | None, settings: Settings | None = None) -> Style:
    """A style id or alias (None: the default style) → that style, when it can paint here.

    An alias means one style on every machine. Raises StyleError with what to run when the style's files are
    missing, or LicenceError for a style that commercial-only mode refuses. In that mode the default style falls
    back to the first offered style available here."""
    s = _settings(settings)
    style = get_style(style_id(name or s.default_style))
    if name is None and s.commercial_only and not (offered(style, s) and _usable(style, s)):
        for other in all_styles():
            if offered(other, s) and _usable(other, s):
                return other
        raise LicenceError(
            "no style available here is cleared for commercial use (commercial-only mode); "
            "see `anipaint styles` and the README's licence table"
        )
    refuse_unoffered(style, s)
    if _usable(style, s):
        return style
    raise StyleError(missing_style(style, s))


def missing_style(style: Style, settings: Settings | None = None) -> str:
    """Why a style can't paint here and what to run, as one sentence."""
    s = _settings(settings)
    held = _held_back(style, s)
    if held is not None:
        return f"style {style.id} could not be downloaded here ({held.why}); retry at {held.retry_clock()}"
    if not downloadable(style, s):
        return (f"style {style.id} has no model files here and no known origin: set ANIPAINT_MIRROR and run "
                f"`anipaint models fetch {style.id}`, or `anipaint models add FILE --style {style.id}`")
    why = "downloads are off (offline)" if s.offline else "downloads on first use are off (ANIPAINT_AUTO_FETCH)"
    return f"style {style.id} is not on this machine and {why}: run `anipaint models fetch {style.id}`"
