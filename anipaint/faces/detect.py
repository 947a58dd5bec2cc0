"""Face detection: YuNet (:mod:`.yunet`) with landmark refinement and a cache keyed by pixels.

``FaceDetector.detect(rgb)`` can be timed on its own (cached by pixel hash; use a fresh detector or new pixels
to time a miss). ``detect(rgb, refine=False)`` is the one-run form for callers that need the faces but not
level landmarks. :func:`get_face_detector` is the process-wide instance for a set of settings.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import cachetools
import cv2
import numpy as np

from anipaint.faces.align import Face, as_rgb, ffhq_quad, quad_transform, warp_from
from anipaint.faces.yunet import YuNet

if TYPE_CHECKING:
    from anipaint.settings import Settings

_REFINE_SIDE, _REFINE_PASSES, _REFINE_SCORE = 256, 4, 0.5  # landmark refinement on the aligned crop


def _pixel_key(rgb: np.ndarray) -> bytes:
    # Keyed by the decoded pixels, not the upload bytes: a re-encoded or re-sent photo with the same pixels hits.
    # SHA-1 for speed (the CPU's SHA instructions: 1.1 ms for a 900 px photo against blake2b's 2.3), not secrecy.
    h = hashlib.sha1(usedforsecurity=False)
    h.update(repr((rgb.shape, rgb.dtype.str)).encode())
    h.update(np.ascontiguousarray(rgb).data)
    return h.digest()


class FaceDetector:
    """YuNet with a bounded, expiring cache of results keyed by pixel hash.

    ``min_size`` is measured in SOURCE pixels: a face that is big in the original but tiny in the capped
    painted picture is exactly the one that gains from being restyled at its own resolution, whereas a face
    tiny in the original has no detail to bring back.
    """

    def __init__(
        self,
        model_path: Path,
        *,
        score_threshold: float,
        min_size: int,
        detect_max_side: int,
        cache_size: int,
        cache_ttl: float,
    ) -> None:
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise FileNotFoundError(f"Face detection model not found: {self.model_path}")
        self.score_threshold = float(score_threshold)
        self.min_size = int(min_size)
        self.detect_max_side = int(detect_max_side)
        self._cache: cachetools.TTLCache = cachetools.TTLCache(maxsize=max(1, cache_size), ttl=cache_ttl)
        self._lock = threading.Lock()
        self._yunet: YuNet | None = None
        self.calls = 0  # detector runs (cache misses that reached YuNet; refinement passes not counted)
        self.cache_hits = self.cache_misses = 0

    def _net(self) -> YuNet:
        with self._lock:
            if self._yunet is None:
                # NMS 0.3 and top_k 5000 are YuNet's published defaults. The net's own threshold is the lower
                # refinement one; the main pass filters by score_threshold itself.
                self._yunet = YuNet(self.model_path, min(self.score_threshold, _REFINE_SCORE), 0.3, 5000)
            return self._yunet

    def _infer(self, rgb: np.ndarray) -> np.ndarray:
        """YuNet rows (x, y, w, h, 5 landmarks, score) for an RGB picture (at most the side of a fixed model)."""
        bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
        net = self._net()
        if net.fixed_side:  # letterbox top-left into the fixed input, so coordinates need no offset
            canvas = np.zeros((net.fixed_side, net.fixed_side, 3), np.uint8)
            canvas[: bgr.shape[0], : bgr.shape[1]] = bgr
            bgr = canvas
        return net.detect(bgr)

    def detect(self, rgb: np.ndarray, *, refine: bool = True, min_size: float | None = None) -> list[Face]:
        """Faces in an RGB uint8 picture, largest first; cached by the hash of its pixels and the options.

        ``refine=False`` keeps YuNet's own landmarks, one network run in all; they read a rolled face as more
        upright than it is (:meth:`_refine`). ``min_size`` replaces the detector's own (a caller detecting in a
        reduced copy of a photo gives the photo's minimum in the copy's pixels)."""
        rgb = as_rgb(rgb)
        smallest = self.min_size if min_size is None else float(min_size)
        key = (_pixel_key(rgb), refine, smallest)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self.cache_hits += 1
                return list(hit)
            self.cache_misses += 1
        faces = self._run(rgb, refine, smallest)  # outside the lock: different pictures detect in parallel
        with self._lock:
            self.calls += 1
            self._cache[key] = tuple(faces)
        return faces

    def clear_cache(self) -> None:
        """Forget every cached detection (a benchmark timing detection as for new photos)."""
        with self._lock:
            self._cache.clear()

    def cache_stats(self) -> dict[str, float]:
        """Counters for metrics: detector calls, cache hits/misses, hit rate and entries held."""
        with self._lock:
            total = self.cache_hits + self.cache_misses
            rate = self.cache_hits / total if total else 0.0
            return dict(
                calls=self.calls, hits=self.cache_hits, misses=self.cache_misses, hit_rate=rate, size=len(self._cache)
            )

    def _run(self, rgb: np.ndarray, refine: bool, min_size: float) -> list[Face]:
        h, w = rgb.shape[:2]
        fixed = self._net().fixed_side
        limit = min(self.detect_max_side or fixed, fixed) if fixed else self.detect_max_side
        scale = min(1.0, limit / max(h, w)) if limit and limit > 0 else 1.0
        size = (max(1, round(w * scale)), max(1, round(h * scale)))
        small = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA) if scale < 1.0 else rgb
        sx, sy = size[0] / w, size[1] / h
        rows = self._infer(small)
        faces: list[Face] = []
        for row in rows:
            x, y, bw, bh = row[0] / sx, row[1] / sy, row[2] / sx, row[3] / sy
            if float(row[14]) < self.score_threshold or min(bw, bh) < min_size:
                continue
            lm = row[4:14].reshape(5, 2).astype(np.float64) / (sx, sy)
            if refine:
                lm = self._refine(rgb, lm)
            lm.setflags(write=False)  # shared through the cache
            faces.append(Face((float(x), float(y), float(bw), float(bh)), lm, float(row[14])))
        faces.sort(key=lambda f: f.box[2] * f.box[3], reverse=True)
        return faces

    def _refine(self, rgb: np.ndarray, lm: np.ndarray) -> np.ndarray:
        """Re-detect the landmarks on the aligned crop until its eyes are level.

        YuNet's landmarks regress towards an upright face: on the astronaut rolled by 30 degrees its eye line
        reads -7 instead of -29. Each pass re-aligns with the last estimate, so the face YuNet sees is more
        upright and its landmarks truer (measured residual roll 30 -> 11 -> 3 -> 2 degrees). An upright face
        stops after one pass (~3 ms at 256 px); the crop comes from the full-resolution picture, which also
        makes landmarks of faces in big photos more precise than the downscaled detection.
        """
        size = _REFINE_SIDE
        for _ in range(_REFINE_PASSES):
            matrix = quad_transform(ffhq_quad(lm), size)
            crop = warp_from(rgb, matrix, size, size, cv2.BORDER_REFLECT_101)
            rows = self._infer(crop)
            if not len(rows):
                break
            # the face we aligned has its nose near the crop's centre; anything else is a neighbour
            dist = np.hypot(rows[:, 8] - 0.5 * size, rows[:, 9] - 0.55 * size)
            if dist.min() > 0.25 * size:
                break
            found = rows[int(dist.argmin()), 4:14].reshape(5, 2).astype(np.float64)
            lm = np.c_[found, np.ones(5)] @ cv2.invertAffineTransform(matrix).T
            if abs(np.degrees(np.arctan2(*(found[1] - found[0])[::-1]))) < 1.5:
                break
        return lm


_shared: dict[tuple, FaceDetector] = {}
_shared_lock = threading.Lock()


def get_face_detector(settings: Settings | None = None, model_path: Path | None = None) -> FaceDetector:
    """The process-wide detector for these settings (one cache shared by every request)."""
    if settings is None:
        from anipaint.settings import get_settings

        settings = get_settings()
    if model_path is None:
        from anipaint.models import helpers

        model_path = helpers.install_face_detector(settings)
        if model_path is None:
            raise FileNotFoundError("No face detection model (YuNet) in the model store or the sources folder.")
    options = dict(
        score_threshold=settings.face_score_threshold,
        min_size=settings.face_min_size,
        detect_max_side=settings.face_detect_max_side,
        cache_size=settings.face_cache_size,
        cache_ttl=settings.face_cache_ttl,
    )
    key = (str(model_path), *options.values())
    with _shared_lock:
        if key not in _shared:
            _shared[key] = FaceDetector(Path(model_path), **options)
        return _shared[key]
