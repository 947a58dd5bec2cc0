"""Measures shared by the face pass and portrait tests."""

from __future__ import annotations

import cv2
import numpy as np


def grad(img: np.ndarray) -> np.ndarray:
    gy, gx = np.gradient(img.astype(np.float32), axis=(0, 1))
    return np.hypot(gx, gy)


def seam_gradient(m: np.ndarray, plain: np.ndarray, out: np.ndarray) -> tuple[float, float]:
    """(median seam gradient on the mask≈0.5 ring, median gradient of the picture), same units.

    out = P + m·(F − P), so the gradient the blend itself adds is (F − P)·∇m with F − P = (out − P)/m;
    everything else on the ring is the two paintings' own content. The issue's criterion, literally: that
    gradient along the mask border is no larger than the picture's median gradient.
    """
    ring = (m > 0.4) & (m < 0.6)
    diff = np.abs(out.astype(np.float32) - plain).max(axis=2)
    seam = diff / np.maximum(m, 1e-3) * grad(m)
    return float(np.median(seam[ring])), float(np.median(grad(cv2.cvtColor(out, cv2.COLOR_RGB2GRAY))))
