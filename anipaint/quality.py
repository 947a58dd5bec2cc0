"""How close two pictures are: the PSNR and the far-off share every check, test and benchmark uses, and the bar a
fast backend must clear against its style's eager network.

PSNR alone averages a few hundred speckles away (White-box in bfloat16: 35 dB, yet 1–2 % of its sky's pixels
off by more than 32 levels), so the bar also caps the share of pixels that are far off.
"""

from __future__ import annotations

import numpy as np

FAITHFUL_PSNR = 40.0  # dB against the eager float32 network
FAR_LEVELS = 32  # a pixel is "far off" when any channel differs by more than this many levels (of 255)
FAITHFUL_FAR_SHARE = 1e-4  # at most 0.01 % of the pixels far off


def psnr(a: np.ndarray, b: np.ndarray, peak: float = 255.0) -> float:
    """Peak signal-to-noise ratio in dB between two arrays of the same shape (inf when identical)."""
    mse = float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))
    return float("inf") if mse == 0 else 10.0 * float(np.log10(peak * peak / mse))


def far_share(a: np.ndarray, b: np.ndarray, levels: int = FAR_LEVELS) -> float:
    """The share of pixels (H, W, C uint8 pictures) with any channel more than ``levels`` apart."""
    diff = np.abs(np.asarray(a, np.int16) - np.asarray(b, np.int16))
    return float((diff.max(axis=-1) > levels).mean())


def faithful(db: float, far: float) -> bool:
    """Whether a picture ``db`` dB from the reference with ``far`` of its pixels far off clears the bar."""
    return db >= FAITHFUL_PSNR and far <= FAITHFUL_FAR_SHARE
