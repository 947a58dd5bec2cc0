"""Real photos at the sizes the engine tests paint."""

from __future__ import annotations

import numpy as np
from PIL import Image


def photo_at(img: Image.Image, side: int = 512) -> np.ndarray:
    """``img`` as RGB with its long side at about ``side``, both sides multiples of 4."""
    img = img.convert("RGB")
    scale = side / max(img.size)
    size = (round(img.width * scale) // 4 * 4, round(img.height * scale) // 4 * 4)
    return np.asarray(img.resize(size, Image.LANCZOS))
