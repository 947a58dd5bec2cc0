"""Pipeline step 2: the decoded picture → the arrays the engine paints (long-side cap, alpha split off)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image


@dataclass
class WorkImage:
    source: np.ndarray  # full-resolution RGB uint8 (H, W, 3), upright; faces are cut from it
    rgb: np.ndarray  # RGB uint8 at the working size (after the long-side cap)
    alpha: np.ndarray | None  # uint8 alpha at the working size, None when opaque

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the working picture, which is also the output size."""
        return self.rgb.shape[1], self.rgb.shape[0]


def fit_long_side(width: int, height: int, max_side: int | None) -> tuple[int, int]:
    """The size after capping the long side at ``max_side`` (never upscales; None or 0 keeps it)."""
    if not max_side or max(width, height) <= max_side:
        return width, height
    scale = max_side / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def to_work_image(img: Image.Image, max_side: int | None) -> WorkImage:
    """Split alpha, cap the size. Lanczos keeps edges crisp, which the painters turn into clean lines."""
    alpha = img.getchannel("A") if img.mode == "RGBA" else None
    rgb_img = img.convert("RGB") if img.mode != "RGB" else img
    source = np.asarray(rgb_img, dtype=np.uint8)
    size = fit_long_side(img.width, img.height, max_side)
    if size != img.size:
        rgb_img = rgb_img.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
        alpha = alpha.resize(size, Image.Resampling.LANCZOS) if alpha is not None else None
    work = np.asarray(rgb_img, dtype=np.uint8)
    alpha_arr = np.asarray(alpha, dtype=np.uint8) if alpha is not None else None
    if alpha_arr is not None and alpha_arr.min() == 255:
        alpha_arr = None  # fully opaque: no need to carry it
    return WorkImage(source=source, rgb=work, alpha=alpha_arr)
