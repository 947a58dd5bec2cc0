"""anipaint: photos in, anime-style pictures out (AnimeGAN v1, v2 and v3), fast on a plain CPU.

>>> from anipaint import get_painter
>>> get_painter("hayao").paint("photo.jpg").save("anime.png")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from anipaint.painter import Painter, get_painter

__all__ = ["Painter", "get_painter"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # The painter (and torch, ~2 s) loads on first use, so that `anipaint --help`, a refused option or a
    # missing file answer at once, and the server's light modules import without it.
    if name in __all__:
        from anipaint import painter

        return getattr(painter, name)
    raise AttributeError(f"module 'anipaint' has no attribute {name!r}")
