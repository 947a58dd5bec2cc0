"""anipaint: photos and clips in, anime-style pictures out (AnimeGAN v1, v2 and v3), fast on a plain CPU.

>>> import anipaint
>>> anipaint.paint("me.jpg").save("me-anime.png")                      # doctest: +SKIP
>>> anipaint.paint_video("clip.mp4", "clip-anime.mp4", style="hayao")  # doctest: +SKIP
>>> [s.id for s in anipaint.styles()]                                   # doctest: +SKIP

A style's files are downloaded on first use (``ANIPAINT_OFFLINE=1`` forbids that); everything a user can catch
derives from :class:`AnipaintError`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from anipaint.errors import (
    AnipaintError,
    ImageError,
    ImageTooLargeError,
    LicenceError,
    ModelStoreError,
    OptionError,
    StyleError,
)
from anipaint.options import PaintOptions

if TYPE_CHECKING:
    from anipaint.library import StyleInfo, paint, paint_video, styles
    from anipaint.painter import Painter, PaintResult, get_painter

__all__ = [
    "AnipaintError",
    "ImageError",
    "ImageTooLargeError",
    "LicenceError",
    "ModelStoreError",
    "OptionError",
    "PaintOptions",
    "PaintResult",
    "Painter",
    "StyleError",
    "StyleInfo",
    "get_painter",
    "paint",
    "paint_video",
    "styles",
]
__version__ = "0.1.0"

# Loaded on first use: the painter brings torch (~2 s), so that `anipaint --help`, a refused option or a missing
# file answer at once, and the server's light modules import without it.
_LAZY = {"paint": "library", "paint_video": "library", "styles": "library", "StyleInfo": "library",
         "Painter": "painter", "PaintResult": "painter", "get_painter": "painter"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"anipaint.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'anipaint' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
