"""Face blending: paste each restyled face back into the painted picture through a feathered ellipse.

``enhance_faces`` aligns every face out of the full-resolution source, has them painted (the crops of one
size in one batch), colour-matches each to the painted picture around it and blends it back. Its cost is
dominated by the face paints; each crop's side follows the face's own size in the source and the size it is
shown at (:func:`working_side`), so a small face in a group photo costs a small paint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import cv2
import numpy as np

from anipaint.faces.align import (
    Face,
    align_face,
    as_rgb,
    compose,
    crop_side,
    ffhq_quad,
    quad_transform,
    scale_of,
    warp_from,
)
from anipaint.faces.detect import FaceDetector

PaintBatch = Callable[[np.ndarray], np.ndarray]  # (N, S, S, 3) uint8 crops -> painted, same shape

# Faces smaller than this in the PAINTED picture are left alone: at a few pixels nothing of the restyle shows.
_MIN_PAINTED_SIDE = 8
_BATCH_PIXELS = 4 * 512 * 512  # crops painted in one call: bounds the generator's activations
OVERSAMPLE = 1.25  # a face's crop is painted at most this many times the size it is shown at (see working_side)


@lru_cache(maxsize=4)
def crop_mask(size: int) -> np.ndarray:
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


@dataclass(frozen=True)
class Placement:
    """Where a face's aligned crop lands: its working side, crop->painted transform and painted window."""

    face: Face
    side: int
    to_painted: np.ndarray  # 2x3, crop pixels -> painted pixels
    window: tuple[int, int, int, int]  # x0, y0, x1, y1 in the painted picture

    def warp(self, crop_image: np.ndarray, border: int) -> np.ndarray:
        """A crop-space image (``side`` square) resampled into the painted window."""
        x0, y0, x1, y1 = self.window
        return warp_from(crop_image, self.to_painted, x1 - x0, y1 - y0, border, x0, y0)


def place(
    face: Face, source_shape: tuple[int, ...], painted_shape: tuple[int, ...], side: int
) -> Placement | None:
    """The face's placement for a crop of ``side`` pixels, or None if off-picture or too small to show."""
    sh, sw = source_shape[:2]
    ph, pw = painted_shape[:2]
    to_painted = np.array([[pw / sw, 0, 0.5 * pw / sw - 0.5], [0, ph / sh, 0.5 * ph / sh - 0.5]])
    src_to_crop = quad_transform(ffhq_quad(face.landmarks), side)
    crop_to_painted = compose(to_painted, cv2.invertAffineTransform(src_to_crop))
    if scale_of(crop_to_painted) * side / 2 < _MIN_PAINTED_SIDE:  # a face is ~1/2 of the crop wide
        return None
    corners = np.array([[0, 0, 1], [side, 0, 1], [0, side, 1], [side, side, 1]], np.float64) @ crop_to_painted.T
    x0 = int(np.clip(np.floor(corners[:, 0].min()), 0, pw))
    y0 = int(np.clip(np.floor(corners[:, 1].min()), 0, ph))
    x1 = int(np.clip(np.ceil(corners[:, 0].max()) + 1, 0, pw))
    y1 = int(np.clip(np.ceil(corners[:, 1].max()) + 1, 0, ph))
    if x1 <= x0 or y1 <= y0:
        return None
    return Placement(face, side, crop_to_painted, (x0, y0, x1, y1))


def working_side(face: Face, source_shape: tuple[int, ...], painted_shape: tuple[int, ...], face_size: int) -> int:
    """The side a face's crop is painted at: what its own source pixels support (:func:`crop_side`), at most
    ``face_size``, and at most :data:`OVERSAMPLE` times the size the face is shown at in the painted picture.

    A picture painted smaller than its source shows each face smaller too; detail painted beyond that size is
    averaged away when the crop is reduced into place, while its cost grows with the square. Compared side by
    side on the group photo at 512 px: crops at 1.0x the shown size draw softer lines, from 1.25x up (and at the
    full source size) the faces look the same."""
    shown = max(painted_shape[0] / source_shape[0], painted_shape[1] / source_shape[1])
    return crop_side(face, face_size, scale=min(1.0, OVERSAMPLE * shown))


def faces_as_painted(detector: FaceDetector, source_shape: tuple[int, ...], painted_input: np.ndarray) -> list[Face]:
    """The faces the pass restyles, in source pixels: one YuNet run, no landmark refinement, on the picture as
    it is painted (the source reduced to the painted size), with the detector's minimum face size still
    measured in the source.

    The pass restyles only faces that show in the painted picture (:data:`_MIN_PAINTED_SIDE`), and YuNet finds
    faces from ~10 px of what it sees, so the full-resolution photo would add only faces too small to restyle.
    Nor does the pass need refined landmarks: it paints each crop with the picture's own generator, not a face
    model, and pastes it back through that crop's own transform, so it needs each face's place and size, not
    level eyes, and one run on the smaller picture is several times cheaper than refined detection at full
    size (the figures are in docs/benchmarks.md)."""
    sy, sx = source_shape[0] / painted_input.shape[0], source_shape[1] / painted_input.shape[1]
    found = detector.detect(painted_input, refine=False, min_size=detector.min_size / max(sx, sy))
    return [face.scaled(sx, sy) for face in found]


def place_faces(
    faces: list[Face],
    source_shape: tuple[int, ...],
    painted_shape: tuple[int, ...],
    face_size: int,
    own_resolution: bool = True,
) -> list[Placement]:
    """Placements of the faces that show, each at its :func:`working_side` with ``own_resolution``, else all
    at ``face_size`` (a face model trained on crops of that size)."""
    placed = (place(f, source_shape, painted_shape,
                    working_side(f, source_shape, painted_shape, face_size) if own_resolution else face_size)
              for f in faces)
    return [p for p in placed if p is not None]


def paint_crops(
    source: np.ndarray, placements: list[Placement], paint_batch: PaintBatch
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The aligned crops of every placement and the same painted by ``paint_batch``, in the placements' order:
    crops of one side go in one call (in bounded batches)."""
    crops: list[np.ndarray] = [np.empty(0)] * len(placements)
    painted: list[np.ndarray] = [np.empty(0)] * len(placements)
    by_side: dict[int, list[int]] = {}
    for i, p in enumerate(placements):
        by_side.setdefault(p.side, []).append(i)
    for side, indices in by_side.items():
        per_batch = max(1, _BATCH_PIXELS // (side * side))
        for start in range(0, len(indices), per_batch):
            chunk = indices[start : start + per_batch]
            batch = np.stack([align_face(source, placements[i].face, side)[0] for i in chunk])
            styled = np.asarray(paint_batch(batch))
            if styled.shape != batch.shape:  # a painter that rounds sizes to its stride: bring it back
                styled = np.stack([cv2.resize(s[:, :, :3], (side, side), interpolation=cv2.INTER_AREA)
                                   for s in styled])
            for i, crop, out in zip(chunk, batch, styled, strict=True):
                crops[i], painted[i] = crop, out
    return crops, painted


def _paste(out: np.ndarray, placement: Placement, styled: np.ndarray, weight: np.ndarray) -> None:
    """Blend a painted crop, colour-matched, into ``out`` (in place); ``weight`` in painted-window pixels."""
    x0, y0, x1, y1 = placement.window
    # REPLICATE keeps bilinear taps at the crop's edge from pulling in black; the weight is 0 there anyway.
    placed_face = placement.warp(styled.astype(np.float32) / 255, cv2.BORDER_REPLICATE)
    ref = out[y0:y1, x0:x1].astype(np.float32) / 255
    placed_face = _match_colour(placed_face, ref, weight)
    w3 = weight[:, :, None]
    blended = ref * (1 - w3) + placed_face * w3
    out[y0:y1, x0:x1] = np.clip(blended * 255 + 0.5, 0, 255).astype(np.uint8)


def face_mask(
    face: Face, source_shape: tuple[int, ...], painted_shape: tuple[int, ...], face_size: int = 512
) -> np.ndarray:
    """The blend weight (float32, painted picture size, 0..1) with which ``face`` is pasted back."""
    out = np.zeros(painted_shape[:2], np.float32)
    placed = place(face, source_shape, painted_shape, face_size)
    if placed is not None:
        x0, y0, x1, y1 = placed.window
        out[y0:y1, x0:x1] = placed.warp(crop_mask(face_size), cv2.BORDER_CONSTANT)
    return out


def _match_colour(face: np.ndarray, ref: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Shift the restyled face's Lab mean (and, within bounds, spread) to the painted picture under the mask.

    The mean shift removes the brightness/tint step at the seam; the spread is only nudged (ratio clipped)
    because the whole point is that the restyled face has more contrast (eyes, mouth) than the flat one.
    """
    face_lab = cv2.cvtColor(face, cv2.COLOR_RGB2Lab)
    ref_lab = cv2.cvtColor(ref, cv2.COLOR_RGB2Lab)
    # Weighted moments as products with the flattened weight (one pass each; centred, so float32 does not
    # cancel: within 5e-6 of float64), a few times faster than numpy's broadcast-then-sum over (H, W, 3).
    flat = weight.reshape(-1)
    w = (flat / flat.sum(dtype=np.float64)).astype(np.float32)
    f, r = face_lab.reshape(-1, 3), ref_lab.reshape(-1, 3)
    centred_f, centred_r = f - w @ f, r - w @ r
    sd_f = np.sqrt(w @ np.square(centred_f)) + 1e-3
    sd_r = np.sqrt(w @ np.square(centred_r)) + 1e-3
    ratio = np.clip(sd_r / sd_f, 0.75, 1.25).astype(np.float32)
    matched = (centred_f * ratio + w @ r).reshape(face_lab.shape)
    return np.clip(cv2.cvtColor(matched, cv2.COLOR_Lab2RGB), 0.0, 1.0)


def restyle_and_paste(
    source: np.ndarray,
    painted: np.ndarray,
    placements: list[Placement],
    paint_batch: PaintBatch,
    weigh: Callable[[Placement, np.ndarray], np.ndarray],
    paste: Callable[[np.ndarray, Placement, np.ndarray, np.ndarray], None],
) -> np.ndarray:
    """Paint every placement's aligned crop and paste it into a copy of ``painted`` with the weight
    ``weigh(placement, crop)`` (painted-window pixels) through ``paste(out, placement, styled, weight)``."""
    out = painted.copy()
    crops, styled_crops = paint_crops(source, placements, paint_batch)
    for placement, crop, styled in zip(placements, crops, styled_crops, strict=True):
        weight = weigh(placement, crop)
        if weight.sum() >= 1e-3:
            paste(out, placement, styled, weight)
    return out


def enhance_faces(
    source: np.ndarray,
    painted: np.ndarray,
    faces: list[Face],
    paint_batch: PaintBatch,
    *,
    face_size: int = 512,
) -> np.ndarray:
    """Restyle each face at its own resolution and blend it into (a copy of) the painted picture.

    ``source`` is the full-resolution RGB uint8 photo the faces were detected on, ``painted`` the painted
    picture at its (capped) size; the scale between the two is folded into the transforms. ``paint_batch``
    takes and returns a stack of square RGB uint8 crops (N, S, S, 3), S at most ``face_size``.
    """
    if not faces:
        return painted.copy()
    source = as_rgb(source)
    placements = place_faces(faces, source.shape, painted.shape, face_size)
    return restyle_and_paste(source, painted, placements, paint_batch,
                             lambda p, _crop: p.warp(crop_mask(p.side), cv2.BORDER_CONSTANT), _paste)
