"""Portrait mode: anime faces from a face model, blended inside the person; the background in its own style.

Each face is aligned out of the full-resolution source exactly as the face pass does (:mod:`.blend`), the middle
of each crop around the face (the face model's ``paint_shape``, :func:`paint_window`) is painted by a face model
(AnimeGANv3 JP face), and each is pasted back through ``person probability of the crop × a feathered window``
over that middle. The face model draws open anime eyes only at the crop's own scale (at 384 px it draws slits,
docs/benchmarks.md), so portrait mode saves time by painting less of the crop, not by painting it smaller: the
margin left out is background and shoulders that the window faded out anyway. The face model paints the crop's
background a pale grey: the person factor keeps that grey off everything that is not the person, and the window
keeps the crop's square edge out of the picture. The face keeps its own anime colours (no colour matching): that
look is the point of the mode; only towards the window's edge does the crop take the picture's local tone, so that
the seam through neck and shoulders is no step.

:func:`person_mask` and :func:`composite` paint the person and the background in different styles: the
segmentation runs on a small copy, is feathered there and scaled up to the painted size (full resolution
included) as 8-bit weights, and the two paintings are mixed band by band so the float temporaries stay small.

``segment`` is a callable RGB uint8 (H, W, 3) → person probability (h, w) float in [0, 1] at any resolution.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import cv2
import numpy as np

from anipaint.faces.align import Face, align_face, as_rgb
from anipaint.faces.blend import PaintBatch, Placement, crop_mask, place_faces, restyle_and_paste

Segment = Callable[[np.ndarray], np.ndarray]

_WINDOW_FEATHER = 0.35  # share of the crop's side over which the window falls to 0 at each edge
_EDGE_FEATHER = 0.1  # share of the painted window's side over which the weight falls to 0 at that window's edge
_WINDOW_CENTRE_Y = 0.54  # the painted window's centre, as a share of the crop's height (the face's centre)
_FACE_MODEL_SIDE = 512  # the aligned crop side a face model's ``paint_shape`` is given for
_TONE_SIGMA = 0.03  # blur (share of the face's window) of the tone the face takes from the picture near its edge
_PERSON_LOW, _PERSON_HIGH = 0.3, 0.7  # probabilities mapped to weight 0 and 1 (a smoothstep between)
_BACKGROUND_FEATHER = 0.006  # Gaussian sigma of the person/background edge, as a share of the long side
_BAND_ROWS = 256  # rows mixed at a time by composite()


def _smoothstep(t: np.ndarray) -> np.ndarray:
    t = np.clip(t, 0.0, 1.0)
    return t * t * (3 - 2 * t)


Rect = tuple[int, int, int, int]  # y0, y1, x0, x1 in the aligned crop


def paint_window(side: int, paint_shape: tuple[int, int] | None) -> Rect:
    """The part of a ``side`` px aligned crop the face model paints: ``paint_shape`` (height, width, given for a
    512 px crop) scaled to ``side`` and rounded to a multiple of 8, centred on the face; the whole crop if None."""
    if paint_shape is None:
        return 0, side, 0, side
    h, w = (min(side, max(8, 8 * round(n * side / _FACE_MODEL_SIDE / 8))) for n in paint_shape)
    y0 = int(np.clip(round(_WINDOW_CENTRE_Y * side - h / 2), 0, side - h))
    x0 = (side - w) // 2
    return y0, y0 + h, x0, x0 + w


def _ramp(n: int, feather: float) -> np.ndarray:
    x = (np.arange(n, dtype=np.float32) + 0.5) / n
    return _smoothstep(np.minimum(x, 1 - x) / feather)


@lru_cache(maxsize=4)
def _window(side: int, rect: Rect) -> np.ndarray:
    """1 over the middle of the crop, falling smoothly to 0 at its square edge (over :data:`_WINDOW_FEATHER` of
    the side), and to 0 at the edge of the painted window ``rect`` too (over :data:`_EDGE_FEATHER` of its side).
    The crop-wide fall keeps the seam through hair and shoulders as gentle as when the whole crop was painted."""
    y0, y1, x0, x1 = rect
    ramp = _ramp(side, _WINDOW_FEATHER)
    window = np.zeros((side, side), np.float32)
    window[y0:y1, x0:x1] = np.outer(ramp[y0:y1] * _ramp(y1 - y0, _EDGE_FEATHER),
                                    ramp[x0:x1] * _ramp(x1 - x0, _EDGE_FEATHER))
    window.setflags(write=False)
    return window


def _windowed(paint_batch: PaintBatch, rect: Rect) -> PaintBatch:
    """``paint_batch`` painting only ``rect`` of each crop; the rest of the crop repeats the window's edge (the
    blend weighs it 0; the tone blur in :func:`_paste` then sees no step at the window's edge)."""
    y0, y1, x0, x1 = rect

    def paint(crops: np.ndarray) -> np.ndarray:
        side = crops.shape[1]
        if rect == (0, side, 0, side):
            return paint_batch(crops)
        painted = np.asarray(paint_batch(np.ascontiguousarray(crops[:, y0:y1, x0:x1])))
        return np.pad(painted, ((0, 0), (y0, side - y1), (x0, side - x1), (0, 0)), mode="edge")

    return paint


def person_probability(rgb: np.ndarray, segment: Segment, shape: tuple[int, int]) -> np.ndarray:
    """Person probability of ``rgb`` as float32 of ``shape`` (h, w). The picture is letterboxed into a square
    first (segmenters take a square and a stretched person is segmented worse), and the map cropped back."""
    h, w = rgb.shape[:2]
    side = max(h, w)
    square = cv2.copyMakeBorder(rgb, 0, side - h, 0, side - w, cv2.BORDER_CONSTANT, value=(0, 0, 0))
    prob = np.asarray(segment(square), np.float32).squeeze()
    ph, pw = prob.shape
    prob = prob[: max(1, round(ph * h / side)), : max(1, round(pw * w / side))]
    return cv2.resize(prob, (shape[1], shape[0]), interpolation=cv2.INTER_LINEAR)


def _person_weight(prob: np.ndarray) -> np.ndarray:
    return _smoothstep((prob - _PERSON_LOW) / (_PERSON_HIGH - _PERSON_LOW))


def _placements(faces: list[Face], source_shape, painted_shape, face_size: int) -> list[Placement]:
    # The face model draws open anime eyes at the size it was trained on and half-shut ones at half of it.
    return place_faces(faces, source_shape, painted_shape, face_size, own_resolution=False)


def _weight(placement: Placement, crop: np.ndarray, segment: Segment, rect: Rect) -> np.ndarray:
    """The blend weight in the placement's painted window: the person inside the crop × the window over ``rect``."""
    side = placement.side
    return placement.warp(_person_weight(person_probability(crop, segment, (side, side))) * _window(side, rect),
                          cv2.BORDER_CONSTANT)


def portrait_mask(
    source: np.ndarray, painted_shape: tuple[int, ...], face: Face, segment: Segment, face_size: int = 512,
    paint_shape: tuple[int, int] | None = None,
) -> np.ndarray:
    """The weight (float32, painted size, 0..1) with which portrait mode pastes ``face``'s anime face."""
    out = np.zeros(painted_shape[:2], np.float32)
    source = as_rgb(source)
    for placement in _placements([face], source.shape, painted_shape, face_size):
        x0, y0, x1, y1 = placement.window
        rect = paint_window(placement.side, paint_shape)
        out[y0:y1, x0:x1] = _weight(placement, align_face(source, face, placement.side)[0], segment, rect)
    return out


def portrait_faces(
    source: np.ndarray,
    painted: np.ndarray,
    faces: list[Face],
    paint_batch: PaintBatch,
    segment: Segment,
    *,
    face_size: int = 512,
    paint_shape: tuple[int, int] | None = None,
) -> np.ndarray:
    """Every face restyled by the face model ``paint_batch`` and blended into (a copy of) ``painted``, inside the
    person only. ``source`` is the full-resolution photo the faces were found on; ``paint_shape`` is the face
    model's (:func:`paint_window`)."""
    if not faces:
        return painted.copy()
    source = as_rgb(source)
    placements = _placements(faces, source.shape, painted.shape, face_size)
    rect = paint_window(face_size, paint_shape)  # every crop is face_size (see _placements)
    return restyle_and_paste(source, painted, placements, _windowed(paint_batch, rect),
                             lambda p, crop: _weight(p, crop, segment, rect), _paste)


def _paste(out: np.ndarray, placement: Placement, styled: np.ndarray, weight: np.ndarray) -> None:
    """Blend a face-model crop into ``out`` (in place). Inside the face it keeps its own colours; towards the
    window's edge (neck, shoulders, hair ends) it takes the picture's local tone (a blurred difference), so
    the two paintings meet without a step, while the face itself keeps its colours."""
    x0, y0, x1, y1 = placement.window
    face = placement.warp(styled.astype(np.float32), cv2.BORDER_REPLICATE)
    ref = out[y0:y1, x0:x1].astype(np.float32)
    keep = placement.warp(crop_mask(placement.side), cv2.BORDER_CONSTANT)[:, :, None]
    face += (1 - keep) * cv2.GaussianBlur(ref - face, (0, 0), _TONE_SIGMA * (x1 - x0))
    blended = ref + weight[:, :, None] * (face - ref)
    out[y0:y1, x0:x1] = np.clip(blended + 0.5, 0, 255).astype(np.uint8)


def person_mask(rgb: np.ndarray, segment: Segment, shape: tuple[int, int]) -> np.ndarray:
    """The feathered person weight at ``shape`` (h, w), uint8 0..255 so a full-resolution mask stays small.

    Segmented and feathered on the small copy ``rgb`` (any size; the painted picture or less), then scaled up
    bilinearly: the feather is a share of the picture, so it looks the same at every output size."""
    h, w = rgb.shape[:2]
    small = min(1.0, 512 / max(h, w))
    size = (max(1, round(w * small)), max(1, round(h * small)))
    if small < 1.0:
        rgb = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)
    weight = _person_weight(person_probability(as_rgb(rgb), segment, (size[1], size[0])))
    weight = cv2.GaussianBlur(weight, (0, 0), _BACKGROUND_FEATHER * max(size))
    weight = cv2.resize(weight, (shape[1], shape[0]), interpolation=cv2.INTER_LINEAR)
    return np.clip(weight * 255 + 0.5, 0, 255).astype(np.uint8)


def composite(person: np.ndarray, background: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``person`` where ``mask`` (uint8, 255 = person) says so, ``background`` elsewhere; a new uint8 array."""
    out = np.empty_like(person)
    for r0 in range(0, person.shape[0], _BAND_ROWS):
        r1 = r0 + _BAND_ROWS
        m = mask[r0:r1, :, None].astype(np.float32) / 255
        mixed = background[r0:r1] + m * (person[r0:r1].astype(np.float32) - background[r0:r1])
        out[r0:r1] = np.clip(mixed + 0.5, 0, 255).astype(np.uint8)
    return out
