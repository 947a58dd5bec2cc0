"""Face enhancement ("face2paint"): detect faces, restyle each at its own resolution, blend it back.

A picture painted at a 512 px cap leaves the faces of a group photo ~60 px wide, too small for the generator
to draw eyes and mouths. So each face is detected (YuNet), aligned FFHQ-style out of the FULL-RESOLUTION
source into a ``face_size`` square, painted on its own by a callable the Painter passes in, colour-matched to
the painted picture around it and blended back through a feathered ellipse.

Both stages can be timed on their own (for the benchmark): ``FaceDetector.detect(rgb)`` for detection (cached
by pixel hash; use a fresh detector or new pixels to time a miss) and ``enhance_faces(...)`` for alignment,
restyle and blending (its cost is dominated by one ``paint_face`` call per face).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import cachetools
import cv2
import numpy as np

if TYPE_CHECKING:
    from anipaint.settings import Settings

_FIXED_SIDE = 640  # the fixed model's input; older OpenCV builds refuse any other size for it
_REFINE_SIDE, _REFINE_PASSES, _REFINE_SCORE = 256, 4, 0.5  # landmark refinement on the aligned crop
# Faces smaller than this in the PAINTED picture are left alone: at a few pixels nothing of the restyle shows.
_MIN_PAINTED_SIDE = 8


@dataclass(frozen=True)
class Face:
    box: tuple[float, float, float, float]  # x, y, w, h in source pixels
    landmarks: np.ndarray  # (5, 2) source pixels: right eye, left eye, nose tip, right/left mouth corner
    score: float


def _pixel_key(rgb: np.ndarray) -> bytes:
    # Keyed by the decoded pixels, not the upload bytes: a re-encoded or re-sent photo with the same pixels hits.
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((rgb.shape, rgb.dtype.str)).encode())
    h.update(np.ascontiguousarray(rgb).data)
    return h.digest()


class FaceDetector:
    """YuNet via ``cv2.FaceDetectorYN`` with a bounded, expiring cache of results keyed by pixel hash.

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
        self._fixed = False  # set on the first failure to run a fixed-input model at another size
        self._cache: cachetools.TTLCache = cachetools.TTLCache(maxsize=max(1, cache_size), ttl=cache_ttl)
        self._lock = threading.Lock()
        # cv2 detectors keep their input size as state, so each thread gets its own (loading is ~ms).
        self._local = threading.local()
        self.calls = 0  # detector runs (cache misses that reached YuNet; refinement passes not counted)
        self.cache_hits = self.cache_misses = 0

    def _net(self) -> cv2.FaceDetectorYN:
        net = getattr(self._local, "net", None)
        if net is None:
            # NMS 0.3 and top_k 5000 are YuNet's published defaults. The net's own threshold is the lower
            # refinement one; the main pass filters by score_threshold itself.
            floor = min(self.score_threshold, _REFINE_SCORE)
            # OpenCV 5 warns on every detector creation that its new graph engine ignores targets; users
            # should not see that on each thread's first face.
            cv2.utils.logging.setLogLevel(min(cv2.utils.logging.getLogLevel(), cv2.utils.logging.LOG_LEVEL_ERROR))
            net = cv2.FaceDetectorYN.create(str(self.model_path), "", (320, 320), floor, 0.3, 5000)
            self._local.net = net
        return net

    def _infer(self, rgb: np.ndarray) -> np.ndarray:
        """YuNet rows (x, y, w, h, 5 landmarks, score) for an RGB picture at most 640 px if the model is fixed."""
        bgr = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)
        if self._fixed:  # letterbox top-left into the fixed input, so coordinates need no offset
            canvas = np.zeros((_FIXED_SIDE, _FIXED_SIDE, 3), np.uint8)
            canvas[: bgr.shape[0], : bgr.shape[1]] = bgr
            bgr = canvas
        net = self._net()
        net.setInputSize((bgr.shape[1], bgr.shape[0]))
        _, rows = net.detect(bgr)
        return np.zeros((0, 15), np.float32) if rows is None else rows

    def detect(self, rgb: np.ndarray) -> list[Face]:
        """Faces in an RGB uint8 picture, largest first; cached by the hash of its pixels."""
        rgb = _as_rgb(rgb)
        key = _pixel_key(rgb)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self.cache_hits += 1
                return list(hit)
            self.cache_misses += 1
        faces = self._run(rgb)  # outside the lock: different pictures detect in parallel
        with self._lock:
            self.calls += 1
            self._cache[key] = tuple(faces)
        return faces

    def cache_stats(self) -> dict[str, float]:
        """Counters for metrics: detector calls, cache hits/misses, hit rate and entries held."""
        with self._lock:
            total = self.cache_hits + self.cache_misses
            rate = self.cache_hits / total if total else 0.0
            return dict(
                calls=self.calls, hits=self.cache_hits, misses=self.cache_misses, hit_rate=rate, size=len(self._cache)
            )

    def _run(self, rgb: np.ndarray) -> list[Face]:
        h, w = rgb.shape[:2]
        limit = min(self.detect_max_side or _FIXED_SIDE, _FIXED_SIDE) if self._fixed else self.detect_max_side
        scale = min(1.0, limit / max(h, w)) if limit and limit > 0 else 1.0
        size = (max(1, round(w * scale)), max(1, round(h * scale)))
        small = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA) if scale < 1.0 else rgb
        sx, sy = size[0] / w, size[1] / h
        try:
            rows = self._infer(small)
        except cv2.error:
            if self._fixed:
                raise
            self._fixed = True  # a fixed-input model under an OpenCV that cannot resize it: letterbox
            return self._run(rgb)
        faces: list[Face] = []
        for row in rows:
            x, y, bw, bh = row[0] / sx, row[1] / sy, row[2] / sx, row[3] / sy
            if float(row[14]) < self.score_threshold or min(bw, bh) < self.min_size:
                continue
            lm = self._refine(rgb, row[4:14].reshape(5, 2).astype(np.float64) / (sx, sy))
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
            matrix = _quad_transform(_ffhq_quad(lm), size)
            crop = _warp_from(rgb, matrix, size, size, cv2.BORDER_REFLECT_101)
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


def _as_rgb(img: np.ndarray) -> np.ndarray:
    if img.dtype != np.uint8:
        raise ValueError("Face detection expects a uint8 image.")
    if img.ndim == 2:
        return np.repeat(img[:, :, None], 3, axis=2)
    if img.ndim == 3 and img.shape[2] == 4:
        return img[:, :, :3]
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"Face detection expects an RGB image, got shape {img.shape}.")
    return img


# --- alignment ------------------------------------------------------------------------------------------------


def _ffhq_quad(landmarks: np.ndarray) -> np.ndarray:
    """FFHQ crop square (4 corners: top-left, bottom-left, bottom-right, top-right) from YuNet's 5 points.

    The FFHQ recipe (Karras et al.) uses the eye centres and mouth corners: the square is rotated so the eyes
    are level, centred a little below the eyes and about 4 eye distances wide, leaving room for hair and chin.
    YuNet's "right eye" is the subject's right, i.e. the one on the image's left.
    """
    lm = np.asarray(landmarks, np.float64)
    eye_l, eye_r, mouth_l, mouth_r = lm[0], lm[1], lm[3], lm[4]  # image-left / image-right
    eye_avg = (eye_l + eye_r) / 2
    eye_to_eye = eye_r - eye_l
    eye_to_mouth = (mouth_l + mouth_r) / 2 - eye_avg
    x = eye_to_eye - np.flipud(eye_to_mouth) * (-1, 1)  # both cues to the roll, so one bad point matters less
    x /= np.hypot(*x) + 1e-9
    x *= max(np.hypot(*eye_to_eye) * 2.0, np.hypot(*eye_to_mouth) * 1.8)
    y = np.flipud(x) * (-1, 1)
    c = eye_avg + eye_to_mouth * 0.1
    return np.stack([c - x - y, c - x + y, c + x + y, c + x - y])


def _quad_transform(quad: np.ndarray, size: int) -> np.ndarray:
    """2x3 similarity mapping the quad onto the ``size`` square (pixel centres at 0.5 .. size-0.5)."""
    dst = np.float32([[0, 0], [0, size], [size, size]]) - 0.5
    return cv2.getAffineTransform(quad[:3].astype(np.float32), dst).astype(np.float64)


def _compose(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """2x3 affine ``a`` after ``b``."""
    return (np.vstack([a, (0, 0, 1)]) @ np.vstack([b, (0, 0, 1)]))[:2]


def _scale_of(m: np.ndarray) -> float:
    return float(np.sqrt(abs(np.linalg.det(m[:, :2]))))


def align_face(source: np.ndarray, face: Face, face_size: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """The aligned ``face_size`` square crop of ``face`` from the full-resolution source, and its 2x3 transform
    (source pixels -> crop pixels). Parts outside the frame are filled by reflection, so a face at the border
    still gives the painter a whole-looking face; those parts are never blended back."""
    matrix = _quad_transform(_ffhq_quad(face.landmarks), face_size)
    return _warp_from(source, matrix, face_size, face_size, cv2.BORDER_REFLECT_101), matrix


def _warp_from(
    src: np.ndarray, matrix: np.ndarray, out_w: int, out_h: int, border: int, x0: int = 0, y0: int = 0
) -> np.ndarray:
    """``warpAffine`` that does not alias when shrinking: when the transform shrinks (a face bigger than the
    crop, or a 512 crop going back into a 60 px face), the needed region is first reduced with INTER_AREA.
    ``x0, y0`` is the origin of the output window in the transform's output space."""
    matrix = _compose(np.array([[1, 0, -x0], [0, 1, -y0]], np.float64), matrix)
    k = _scale_of(matrix)
    if k < 0.9:
        inv = cv2.invertAffineTransform(matrix)
        corners = np.array([[0, 0, 1], [out_w, 0, 1], [0, out_h, 1], [out_w, out_h, 1]], np.float64) @ inv.T
        sh, sw = src.shape[:2]
        left = int(np.clip(np.floor(corners[:, 0].min()) - 2, 0, sw - 1))
        top = int(np.clip(np.floor(corners[:, 1].min()) - 2, 0, sh - 1))
        right = int(np.clip(np.ceil(corners[:, 0].max()) + 3, left + 1, sw))
        bottom = int(np.clip(np.ceil(corners[:, 1].max()) + 3, top + 1, sh))
        region = src[top:bottom, left:right]
        rw, rh = max(1, round(region.shape[1] * k)), max(1, round(region.shape[0] * k))
        src = cv2.resize(region, (rw, rh), interpolation=cv2.INTER_AREA)
        fx, fy = region.shape[1] / rw, region.shape[0] / rh
        # reduced pixel (i, j) has its centre at region pixel ((i + .5) * fx - .5, ...), offset by left/top
        back = np.array([[fx, 0, 0.5 * fx - 0.5 + left], [0, fy, 0.5 * fy - 0.5 + top]], np.float64)
        matrix = _compose(matrix, back)
    return cv2.warpAffine(src, matrix, (out_w, out_h), flags=cv2.INTER_LINEAR, borderMode=border)


# --- blending -------------------------------------------------------------------------------------------------


@lru_cache(maxsize=4)
def _crop_mask(size: int) -> np.ndarray:
    """Feathered ellipse over face, hairline and chin in the aligned crop (1 inside, smooth fall to 0).

    In the FFHQ crop the eyes sit at ~0.47 of the height and ~1/4 of the width apart, the mouth at ~0.72:
    both stay at full weight. The feather is wide (the outer 60 % of the radius) and lies INSIDE the ellipse,
    so the crop's square edge (and its reflected border) never reaches the picture, and the step between the
    two paintings of the face outline is spread thin (measured: seam gradient ~1/2 of the picture's median;
    a 35 % feather gave ~1x).
    """
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    u = ((xx + 0.5) / size - 0.5) / 0.38
    v = ((yy + 0.5) / size - 0.54) / 0.46
    r = np.sqrt(u * u + v * v)
    t = np.clip((1.0 - r) / 0.6, 0.0, 1.0)
    mask = t * t * (3 - 2 * t)  # smoothstep: no kink where the feather starts or ends
    mask.setflags(write=False)
    return mask


def _placement(
    face: Face, source_shape: tuple[int, ...], painted_shape: tuple[int, ...], face_size: int
) -> tuple[np.ndarray, tuple[int, int, int, int]] | None:
    """Crop->painted transform and the painted-picture window it covers, or None if off-picture/too small."""
    sh, sw = source_shape[:2]
    ph, pw = painted_shape[:2]
    to_painted = np.array([[pw / sw, 0, 0.5 * pw / sw - 0.5], [0, ph / sh, 0.5 * ph / sh - 0.5]])
    src_to_crop = _quad_transform(_ffhq_quad(face.landmarks), face_size)
    crop_to_painted = _compose(to_painted, cv2.invertAffineTransform(src_to_crop))
    if _scale_of(crop_to_painted) * face_size / 2 < _MIN_PAINTED_SIDE:  # a face is ~1/2 of the crop wide
        return None
    s = face_size
    corners = np.array([[0, 0, 1], [s, 0, 1], [0, s, 1], [s, s, 1]], np.float64) @ crop_to_painted.T
    x0 = int(np.clip(np.floor(corners[:, 0].min()), 0, pw))
    y0 = int(np.clip(np.floor(corners[:, 1].min()), 0, ph))
    x1 = int(np.clip(np.ceil(corners[:, 0].max()) + 1, 0, pw))
    y1 = int(np.clip(np.ceil(corners[:, 1].max()) + 1, 0, ph))
    if x1 <= x0 or y1 <= y0:
        return None
    return crop_to_painted, (x0, y0, x1, y1)


def face_mask(
    face: Face, source_shape: tuple[int, ...], painted_shape: tuple[int, ...], face_size: int = 512
) -> np.ndarray:
    """The blend weight (float32, painted picture size, 0..1) with which ``face`` is pasted back."""
    out = np.zeros(painted_shape[:2], np.float32)
    placed = _placement(face, source_shape, painted_shape, face_size)
    if placed is not None:
        matrix, (x0, y0, x1, y1) = placed
        out[y0:y1, x0:x1] = _warp_from(_crop_mask(face_size), matrix, x1 - x0, y1 - y0, cv2.BORDER_CONSTANT, x0, y0)
    return out


def _match_colour(face: np.ndarray, ref: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Shift the restyled face's Lab mean (and, within bounds, spread) to the painted picture under the mask.

    The mean shift removes the brightness/tint step at the seam; the spread is only nudged (ratio clipped)
    because the whole point is that the restyled face has more contrast (eyes, mouth) than the flat one.
    """
    face_lab = cv2.cvtColor(face, cv2.COLOR_RGB2Lab)
    ref_lab = cv2.cvtColor(ref, cv2.COLOR_RGB2Lab)
    w = weight[:, :, None] / weight.sum()
    mu_f, mu_r = (face_lab * w).sum((0, 1)), (ref_lab * w).sum((0, 1))
    sd_f = np.sqrt(((face_lab - mu_f) ** 2 * w).sum((0, 1))) + 1e-3
    sd_r = np.sqrt(((ref_lab - mu_r) ** 2 * w).sum((0, 1))) + 1e-3
    ratio = np.clip(sd_r / sd_f, 0.75, 1.25).astype(np.float32)
    matched = (face_lab - mu_f.astype(np.float32)) * ratio + mu_r.astype(np.float32)
    return np.clip(cv2.cvtColor(matched, cv2.COLOR_Lab2RGB), 0.0, 1.0)


def enhance_faces(
    source: np.ndarray,
    painted: np.ndarray,
    faces: list[Face],
    paint_face: Callable[[np.ndarray], np.ndarray],
    *,
    face_size: int = 512,
) -> np.ndarray:
    """Restyle each face at its own resolution and blend it into (a copy of) the painted picture.

    ``source`` is the full-resolution RGB uint8 photo the faces were detected on, ``painted`` the painted
    picture at its (capped) size; the scale between the two is folded into the transforms. ``paint_face``
    takes and returns a ``face_size`` square RGB uint8 crop.
    """
    out = painted.copy()
    if not faces:
        return out
    source = _as_rgb(source)
    for face in faces:
        placed = _placement(face, source.shape, out.shape, face_size)
        if placed is None:
            continue
        matrix, (x0, y0, x1, y1) = placed
        crop, _ = align_face(source, face, face_size)
        styled = np.asarray(paint_face(crop))
        if styled.shape != crop.shape:  # a painter that rounds sizes to its stride: bring it back
            styled = cv2.resize(styled[:, :, :3], (face_size, face_size), interpolation=cv2.INTER_AREA)
        ww, hh = x1 - x0, y1 - y0
        weight = _warp_from(_crop_mask(face_size), matrix, ww, hh, cv2.BORDER_CONSTANT, x0, y0)
        if weight.sum() < 1e-3:
            continue
        styled_f = styled.astype(np.float32) / 255
        # REPLICATE keeps bilinear taps at the crop's edge from pulling in black; the mask is 0 there anyway.
        placed_face = _warp_from(styled_f, matrix, ww, hh, cv2.BORDER_REPLICATE, x0, y0)
        ref = out[y0:y1, x0:x1].astype(np.float32) / 255
        placed_face = _match_colour(placed_face, ref, weight)
        w3 = weight[:, :, None]
        blended = ref * (1 - w3) + placed_face * w3
        out[y0:y1, x0:x1] = np.clip(blended * 255 + 0.5, 0, 255).astype(np.uint8)
    return out


# --- shared instance ------------------------------------------------------------------------------------------

_shared: dict[tuple, FaceDetector] = {}
_shared_lock = threading.Lock()


def get_face_detector(settings: Settings | None = None, model_path: Path | None = None) -> FaceDetector:
    """The process-wide detector for these settings (one cache shared by every request)."""
    if settings is None:
        from anipaint.settings import get_settings

        settings = get_settings()
    if model_path is None:
        from anipaint import store

        model_path = store.prepare_face_detector(settings)
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
