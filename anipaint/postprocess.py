"""Pipeline step 5: the painted array → the picture handed back (style strength, alpha restored, no metadata).

Style strength mixes the painted picture with the photo it came from in CIE L*a*b* (D65): equal steps of strength are
about equal steps of perceived change, which mixing sRGB values or linear light is not
(``benchmarks/strength_spaces.py`` compares them). The page's strength slider (``service/static/blend.js``) re-blends
with the same formulas, so what it shows is what the library paints.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from anipaint.options import check_strength

# sRGB primaries → XYZ, and the D65 white the Lab coordinates are taken against.
_RGB_TO_XYZ = np.array(
    [[0.4124564, 0.3575761, 0.1804375], [0.2126729, 0.7151522, 0.0721750], [0.0193339, 0.1191920, 0.9503041]]
)
_XYZ_TO_RGB = np.linalg.inv(_RGB_TO_XYZ)
_WHITE = _RGB_TO_XYZ.sum(axis=1)
_DELTA = 6.0 / 29.0


def srgb_to_lab(rgb: np.ndarray) -> np.ndarray:
    """sRGB uint8 (..., 3) → L*a*b* float64 (L in 0…100)."""
    c = np.asarray(rgb, np.float64) / 255.0
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    t = (linear @ _RGB_TO_XYZ.T) / _WHITE
    f = np.where(t > _DELTA**3, np.cbrt(t), t / (3 * _DELTA**2) + 4.0 / 29.0)
    return np.stack(
        [116.0 * f[..., 1] - 16.0, 500.0 * (f[..., 0] - f[..., 1]), 200.0 * (f[..., 1] - f[..., 2])], axis=-1
    )


def lab_to_srgb(lab: np.ndarray) -> np.ndarray:
    """L*a*b* float (..., 3) → sRGB uint8, out-of-gamut colours clipped."""
    fy = (lab[..., 0] + 16.0) / 116.0
    f = np.stack([fy + lab[..., 1] / 500.0, fy, fy - lab[..., 2] / 200.0], axis=-1)
    t = np.where(f > _DELTA, f**3, 3 * _DELTA**2 * (f - 4.0 / 29.0))
    linear = np.clip((t * _WHITE) @ _XYZ_TO_RGB.T, 0.0, 1.0)
    c = np.where(linear <= 0.0031308, 12.92 * linear, 1.055 * linear ** (1 / 2.4) - 0.055)
    return np.clip(np.rint(c * 255.0), 0, 255).astype(np.uint8)


def blend(photo: np.ndarray, painted: np.ndarray, strength: float) -> np.ndarray:
    """Mix two RGB uint8 pictures of one size in L*a*b*: 0 → the photo, 1 → the painted picture, unchanged."""
    s = check_strength(strength)
    if s == 1.0:
        return painted
    if photo.shape != painted.shape:
        raise ValueError(f"photo {photo.shape} and painted {painted.shape} differ in size")
    a, b = srgb_to_lab(photo), srgb_to_lab(painted)
    return lab_to_srgb(a + s * (b - a))


def finish(
    painted: np.ndarray, alpha: np.ndarray | None, photo: np.ndarray | None = None, strength: float = 1.0
) -> Image.Image:
    """RGB (H, W, 3) plus optional alpha (H, W) → a fresh PIL image with an empty ``info``.

    With ``photo`` (the working-size input) and ``strength`` < 1, the style is mixed back towards the photo."""
    if painted.dtype != np.uint8:
        painted = np.clip(np.rint(painted), 0, 255).astype(np.uint8)
    if photo is not None:
        painted = blend(photo, painted, strength)
    if alpha is not None:
        return Image.fromarray(np.dstack([painted, alpha]), "RGBA")
    return Image.fromarray(np.ascontiguousarray(painted), "RGB")
