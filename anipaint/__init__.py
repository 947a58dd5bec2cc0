"""anipaint: photos in, anime-style pictures out (AnimeGAN v1, v2 and v3), fast on a plain CPU.

>>> from anipaint import get_painter
>>> get_painter("hayao").paint("photo.jpg").save("anime.png")
"""

from anipaint.painter import Painter, get_painter

__all__ = ["Painter", "get_painter"]
__version__ = "0.1.0"
