"""Face tests' helpers: the YuNet files, a detector with test settings, a real painter memoised by pixels, and
checks of where a restyle changed the picture."""

from __future__ import annotations

import hashlib
from pathlib import Path

import cv2
import numpy as np

from anipaint.faces import FaceDetector, blend, face_mask
from support.paths import SOURCES

YUNET = SOURCES / "face" / "face_detection_yunet_2023mar_dynamic.onnx"
YUNET_FIXED = SOURCES / "face" / "face_detection_yunet_2023mar.onnx"


def make_detector(model: Path = YUNET, **kw) -> FaceDetector:
    opts = dict(score_threshold=0.7, min_size=24, detect_max_side=1024, cache_size=8, cache_ttl=600.0)
    return FaceDetector(model, **{**opts, **kw})


class CachedPainter:
    """A real model's paint_array, memoised by pixels (tests repaint the same crops) and counting pictures."""

    def __init__(self, paint) -> None:
        self._paint, self._memo, self.calls, self.batches = paint, {}, 0, 0

    def __call__(self, rgb: np.ndarray) -> np.ndarray:
        self.calls += 1
        key = hashlib.blake2b(np.ascontiguousarray(rgb).data, digest_size=16).hexdigest() + str(rgb.shape)
        if key not in self._memo:
            self._memo[key] = self._paint(rgb)
        return self._memo[key]

    def batch(self, crops: np.ndarray) -> np.ndarray:
        """The face pass's batch interface, one picture at a time (each counted in ``calls``)."""
        self.batches += 1
        return np.stack([self(c) for c in crops])


def enhance_faces(source, painted, faces, paint: CachedPainter, **kw) -> np.ndarray:
    return blend.enhance_faces(source, painted, faces, paint.batch, **kw)


def capped(rgb: np.ndarray, side: int) -> np.ndarray:
    h, w = rgb.shape[:2]
    s = min(1.0, side / max(h, w))
    return cv2.resize(rgb, (round(w * s), round(h * s)), interpolation=cv2.INTER_AREA) if s < 1 else rgb


def roll(lm: np.ndarray) -> float:
    """Eye-line angle in degrees (0 = level), from landmark 0 (image-left eye) to 1."""
    d = lm[1] - lm[0]
    return float(np.degrees(np.arctan2(d[1], d[0])))


def union_mask(faces, source, painted) -> np.ndarray:
    return np.max([face_mask(f, source.shape, painted.shape) for f in faces], axis=0)


def assert_changes_inside_masks_only(source, faces, plain, out, min_change: float = 3.0) -> None:
    support = cv2.dilate((union_mask(faces, source, plain) > 0).astype(np.uint8), np.ones((5, 5), np.uint8))
    assert np.array_equal(out[support == 0], plain[support == 0])
    for f in faces:
        core = face_mask(f, source.shape, plain.shape) > 0.95
        if core.any():  # the restyle actually shows inside the face
            assert np.abs(out[core].astype(float) - plain[core]).mean() > min_change
