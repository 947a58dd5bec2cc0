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
from anipaint.models.registry import Style, all_styles, candidates, get_style
from anipaint.models.sources import downloadable, locate_source
from anipaint.models.store import is_converted
from anipaint.settings import Settings, get_settings


@dataclass(frozen=True)
class StyleStatus:
    style: Style
    available: bool  # converted, or its sources are present and can be converted on first use
    converted: bool
    reason: str | None = None  # why not available


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
    """Converted, its sources are here, or it downloads on first use."""
    if is_converted(style, s) or all(locate_source(src, s) for src in style.sources):
        return True
    return s.auto_fetch and downloadable(style, s)


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
        if missing and s.auto_fetch and downloadable(style, s):
            out.append(StyleStatus(style, True, False, "downloads on first use (ANIPAINT_AUTO_FETCH)"))
        elif missing:
            how = f" (`anipaint models fetch {style.id}`)" if downloadable(style, s) else ""
            out.append(StyleStatus(style, False, False, f"source missing: {', '.join(missing)}{how}"))
        else:
            out.append(StyleStatus(style, True, False, None))
    return out


def resolve(name: str | None, settings: Settings | None = None) -> Style:
    """A style id or alias (None: the default style) → the best style available here.

    Raises StyleError, or LicenceError for a style that commercial-only mode refuses. In that mode the default
    style falls back to the first offered style available here."""
    s = _settings(settings)
    ids = candidates(name or s.default_style)
    allowed = [get_style(i) for i in ids if offered(get_style(i), s)]
    if not allowed and name:
        refuse_unoffered(get_style(ids[0]), s)
    for style in allowed:
        if _usable(style, s):
            return style
    if not name and s.commercial_only:
        for style in all_styles():
            if offered(style, s) and _usable(style, s):
                return style
        raise LicenceError(
            "no style available here is cleared for commercial use (commercial-only mode); "
            "see `anipaint styles` and the README's licence table"
        )
    raise StyleError(f"style {name!r} is not available here (tried {', '.join(ids)}); see `anipaint styles`")
