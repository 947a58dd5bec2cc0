"""Pipeline step 5: the painted array → the picture handed back (alpha restored, no metadata)."""

from __future__ import annotations

import numpy as np
from PIL import Image


def finish(painted: np.ndarray, alpha: np.ndarray | None) -> Image.Image:
    """RGB uint8 (H, W, 3) plus optional alpha (H, W) → a fresh PIL image with an empty ``info``."""
    if painted.dtype != np.uint8:
        painted = np.clip(np.rint(painted), 0, 255).astype(np.uint8)
    if alpha is not None:
        return Image.fromarray(np.dstack([painted, alpha]), "RGBA")
    return Image.fromarray(np.ascontiguousarray(painted), "RGB")
