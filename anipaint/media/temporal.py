"""Steady video: each painted frame is blended with the previous painted frame, moved along the input's motion.

Painting every frame on its own makes lines and flat colours jump from frame to frame where nothing moves, because
the network answers small changes in the input (noise, compression, dithering) with large changes in the
picture. Here the input's optical flow (OpenCV's DIS, on a copy of at most :data:`FLOW_SIDE` pixels) carries the
previous *output* onto the current frame, and the two are mixed where that flow can be trusted:

- the forward and backward flows agree (Sundaram et al.'s consistency check, as a smooth weight), so pixels that
  were hidden in the previous frame (occlusions, things coming into view) are painted fresh;
- the input itself, moved the same way, matches the current input, so anything the flow got wrong, lighting
  changes included, is painted fresh too: that is what keeps moving things from leaving ghost trails;
- at a scene cut (little of the frame is explained by the previous one) nothing is blended.

Where a thing moves in a way the flow cannot follow (hands, a fast pan's edges: untrusted, but not just uncovered),
the fresh painting is steadied on its own: its fine detail is softened and its broad shapes follow the carried
picture's (:data:`MOVING_DETAIL_SIGMA`, :data:`MOVING_SHAPE_SIGMA`). A moving thing is motion-blurred in real
footage anyway, and the detail a style draws on it anew each frame is what flickered most there. Background that
has just come into view (nothing of the previous frame lands on it) is painted fresh, as painted, so a moving thing
leaves no trail.

The blend is recursive, so a still region settles on a steady picture over a few frames while every frame still
follows its own painting by ``1 - ALPHA``. Carrying a picture along the flow resamples it every frame, and blending
slightly misplaced texture softens it; how much depends on the clip and the style, so the resampling's sharpness
is steered from the clip itself: after each frame, towards a steady frame :data:`SHARPNESS_TARGET` times as sharp
(mean gradient) as its fresh painting. The flow is computed from the inputs only, so it can run ahead of the
painting (see :mod:`anipaint.media.frames`).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

# Long side of the copy the flow is computed on (scaled back to the frame). 512, the size clips are painted at by
# default, so lines and texture edges are matched at their own resolution: on hand-held footage 6-21 % less
# warping error than at 256 for 2-6 % more time (benchmarks/handheld_steadiness.py, docs/benchmarks.md).
FLOW_SIDE = 512
# DIS at full resolution (MEDIUM's finest scale) with a cheaper patch search: 8-px patches every 5 px, 12 descent
# steps and 2 variational refinement steps, instead of MEDIUM's 12-px patches every 3 px, 25 and 5. About 0.15× of
# MEDIUM's time, with the same warping error (within ±0.03 of the input's own) and sharpness on the real clips in
# four styles; MEDIUM's two flows cost v3-cute 2.0-2.5× its frame-by-frame time. A coarser finest scale (FAST, or
# MEDIUM on a half-size copy) was up to 2× less steady on grainy phone footage (docs/benchmarks.md).
FLOW_PATCH = 8
FLOW_STRIDE = 5
FLOW_DESCENT = 12
FLOW_REFINEMENT = 2
# How much of the carried-over picture a fully trusted pixel keeps. 0.95 pays only with the soft check and the
# resampling mix below: with a boolean check and bicubic alone it was 4-8 % worse than 0.9 (the carried picture
# drifted sharper and more of it survived); with them, 3-5 % better on hand-held footage.
ALPHA = 0.95
# Input mismatch (0–255, after a light blur) at which trust falls to 1/e. 80 was 4-20 % steadier on real phone
# footage but let a moving object's trail show where it had just been (25 dB against 30 at 40).
PHOTO_SIGMA = 40.0
# The forward-backward check as a soft weight: the loop's error, in multiples of the boolean check's slack, at which
# agreement falls to 1/e (0: the boolean check). A hard cut paints every pixel just over the slack fresh, and on
# hand-held footage those pixels sit in fine texture (foam, hair, leaves) where the flows disagree by a fraction of
# a pixel: fresh paint there flickers more than the slightly misplaced carried picture. Occlusions and wrong flow
# leave loop errors far above the slack, so they still get no weight; the photometric check stays as it was.
# 5: 5-10 % less warping error on hand-held footage than the boolean check (10 gains no more, 1 half as much).
CONSISTENCY_SOFTNESS = 5.0
# Sigma (px) of a blur of the trust map (0: none), so the edges between carried and fresh pixels do not show.
TRUST_FEATHER = 0.0
# Sigma of the blur before the photometric mismatch (it is _PREBLUR, the flow's, unless set): a stronger blur
# keeps noise and compression in fine texture from counting as a mismatch.
MISMATCH_BLUR = 0.0
# Share of the carried picture resampled bicubic, the rest bilinear, for a clip's second frame. OpenCV's bicubic
# (a = −0.75) lifts middle frequencies by up to 2 % per resample and bilinear damps them; the recursion compounds
# either, so a still region carried for many frames drifts sharper (1.0) or softer (0.0). Which share holds a clip
# as sharp as wanted depends on the clip and the style (on real footage the blend of slightly misplaced texture
# softens it too), so from then on the share is steered from the clip itself, see SHARPNESS_TARGET.
CUBIC_SHARE = 0.87
# The steady frame's mean gradient, as a share of its fresh painting's, that the resampling is steered towards: the
# next frame's share is 1 + SHARE_GAIN × (target − this frame's ratio), within SHARE_RANGE (above 1 the resampling
# sharpens past bicubic: bicubic + (share − 1) × (bicubic − bilinear)). On real phone footage a fixed 0.87 left
# clips 0.87-0.88× as sharp as frame by frame; steered, 0.94-0.99× in four styles (docs/benchmarks.md).
# Softer than the painting is steadier, so the target is below 1; 0 keeps the share fixed. Proportional, not
# integrating: the recursive blend integrates already, and an integrating step swung the share between 0.5 and 1.4
# over a second of footage.
SHARPNESS_TARGET = 0.95
SHARE_GAIN = 3.0
SHARE_RANGE = (0.5, 1.5)
CUT_SHARE = 0.3  # a frame with less than this share of trusted pixels starts a new scene
# Moving things the flow cannot follow: untrusted pixels on which the previous frame lands (the forward flow's
# coverage, eroded by COVER_ERODE px so the edge of just-uncovered background counts as uncovered). There, weighted by
# (1 − trust) × coverage, the fresh painting's detail finer than a Gaussian of MOVING_DETAIL_SIGMA is taken away, and
# its shapes coarser than MOVING_SHAPE_SIGMA are replaced by the carried picture's. On real phone footage in
# v3-shinkai (the style that flickers most there) 14-24 % less warping error, sharpness within 0.03; without the
# coverage, just-uncovered background came out blurred (19 dB from its painting where a thing had just left). 0: off.
MOVING_DETAIL_SIGMA = 3.0
MOVING_SHAPE_SIGMA = 5.0
COVER_ERODE = 5
_MOVING_FLOOR = 0.1  # weaker moving weights are left out: the same error, 1 ms less a frame
# How much of the previous *input*, moved along the flow, each input frame keeps before it is painted (0: none).
# The network answers the input's noise and compression changes with bigger changes in the picture; steadying
# the input first takes them away at the source. benchmarks/handheld_steadiness.py measures the choice.
INPUT_ALPHA = 0.0
_PREBLUR = 1.0  # sigma of the blur before flow and mismatch: noise and GIF dithering are not motion


@dataclass(frozen=True)
class Motion:
    """How frame t follows frame t−1: where each pixel of t was in t−1, and how far to trust that."""

    back_map: np.ndarray  # (H, W, 2) float32 source coordinates in frame t−1 for each pixel of frame t
    trust: np.ndarray  # (H, W) float32 in [0, 1]
    cut: bool  # a new scene starts at frame t
    # (H, W) float32 in [0, 1]: whether pixels of frame t−1 land here along the forward flow (0: just uncovered)
    covered: np.ndarray | None = None

    @property
    def trusted_share(self) -> float:
        return float(self.trust.mean())


def _grid(h: int, w: int) -> np.ndarray:
    gx, gy = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    return np.dstack([gx, gy])


def warp(image: np.ndarray, back_map: np.ndarray, interpolation: int = cv2.INTER_LINEAR) -> np.ndarray:
    """``image`` (frame t−1) moved onto frame t through ``back_map``."""
    return cv2.remap(image, back_map[..., 0], back_map[..., 1], interpolation, borderMode=cv2.BORDER_REPLICATE)


def consistent(back: np.ndarray, forward: np.ndarray, pixel: float = 1.0) -> np.ndarray:
    """Where the backward flow (t→t−1) and the forward flow (t−1→t) undo each other: a boolean (H, W) map.

    A pixel fails when it is occluded in one of the frames or the flow there is wrong. ``pixel``: the size of a
    frame's pixel in the flows' units (below 1 for flows on a smaller copy), for the check's fixed slack."""
    h, w = back.shape[:2]
    forward_there = warp(forward, _grid(h, w) + back)
    loop = back + forward_there
    size = _squared_length(back) + _squared_length(forward_there)
    return _squared_length(loop) < 0.01 * size + 0.5 * pixel * pixel


def agreement(back: np.ndarray, forward: np.ndarray, pixel: float = 1.0, softness: float = 0.0) -> np.ndarray:
    """:func:`consistent` as a float32 (H, W) weight in [0, 1]; with ``softness`` > 0, a smooth fall-off: 1/e where
    the loop's squared error is ``softness`` times the boolean check's slack."""
    if softness <= 0:
        return consistent(back, forward, pixel).astype(np.float32)
    h, w = back.shape[:2]
    forward_there = warp(forward, _grid(h, w) + back)
    loop = back + forward_there
    slack = 0.01 * (_squared_length(back) + _squared_length(forward_there)) + 0.5 * pixel * pixel
    return np.exp(-_squared_length(loop) / (softness * slack)).astype(np.float32)


def coverage(forward: np.ndarray, erode: int = COVER_ERODE) -> np.ndarray:
    """Whether pixels of frame t−1 land on each pixel of frame t along the ``forward`` flow (t−1→t): a float32
    (H, W) map in [0, 1], 0 where nothing lands (background just uncovered), smoothed over 3×3 pixels (a stretch
    of the picture leaves single pixels unhit) and eroded by ``erode`` px."""
    h, w = forward.shape[:2]
    x = np.rint(forward[..., 0] + np.arange(w, dtype=np.float32)).astype(np.int32)
    y = np.rint(forward[..., 1] + np.arange(h, dtype=np.float32)[:, None]).astype(np.int32)
    # Pixels that land outside the frame are counted in one spare bin past its end: one pass of bincount over every
    # pixel, instead of picking the inside ones out first (0.8 → 0.6 ms a frame at 426×240).
    index = y * w + x
    index[(x < 0) | (x >= w) | (y < 0) | (y >= h)] = h * w
    count = np.bincount(index.ravel(), minlength=h * w + 1)[: h * w].astype(np.float32).reshape(h, w)
    covered = np.minimum(cv2.blur(count, (3, 3)), 1.0)
    return cv2.erode(covered, np.ones((erode, erode), np.uint8)) if erode > 1 else covered


def _squared_length(flow: np.ndarray) -> np.ndarray:
    # Spelled out: numpy's reductions over a last axis of 2 or 3 are several times slower than these.
    return flow[..., 0] * flow[..., 0] + flow[..., 1] * flow[..., 1]


def _largest_channel(image: np.ndarray) -> np.ndarray:
    return np.maximum(np.maximum(image[..., 0], image[..., 1]), image[..., 2])


class MotionEstimator:
    """Motion between consecutive input frames (RGB uint8, all the same size). Not thread-safe: one per clip."""

    def __init__(self, flow_side: int = FLOW_SIDE) -> None:
        self._flow = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
        self._flow.setPatchSize(FLOW_PATCH)
        self._flow.setPatchStride(FLOW_STRIDE)
        self._flow.setGradientDescentIterations(FLOW_DESCENT)
        self._flow.setVariationalRefinementIterations(FLOW_REFINEMENT)
        self._flow_side = flow_side
        self._previous: tuple[np.ndarray, np.ndarray] | None = None  # (blurred RGB float32, small grey)
        self._grid: np.ndarray | None = None

    def next(self, rgb: np.ndarray) -> Motion | None:
        """The motion from the previous frame given to this one (None for the first frame)."""
        h, w = rgb.shape[:2]
        soft = cv2.GaussianBlur(rgb, (0, 0), _PREBLUR)
        blurred = (cv2.GaussianBlur(rgb, (0, 0), MISMATCH_BLUR) if MISMATCH_BLUR else soft).astype(np.float32)
        scale = min(1.0, self._flow_side / max(h, w))
        grey = cv2.cvtColor(soft, cv2.COLOR_RGB2GRAY)
        if scale < 1.0:
            grey = cv2.resize(grey, (max(8, round(w * scale)), max(8, round(h * scale))), interpolation=cv2.INTER_AREA)
        previous, self._previous = self._previous, (blurred, grey)
        if previous is None or previous[0].shape != blurred.shape:
            return None
        before, before_grey = previous
        back = self._flow.calc(grey, before_grey, None)
        forward = self._flow.calc(before_grey, grey, None)
        # The consistency check where the flows were computed, then scaled up: the same answer for a quarter of
        # the work at 512 px.
        agree = agreement(back, forward, scale, CONSISTENCY_SOFTNESS)
        covered = coverage(forward)
        if scale < 1.0:
            back = cv2.resize(back, (w, h), interpolation=cv2.INTER_LINEAR) / scale
            agree = cv2.resize(agree, (w, h), interpolation=cv2.INTER_NEAREST)
            covered = cv2.resize(covered, (w, h), interpolation=cv2.INTER_NEAREST)
        if self._grid is None or self._grid.shape[:2] != (h, w):
            self._grid = _grid(h, w)
        back_map = self._grid + back
        mismatch = _largest_channel(cv2.absdiff(warp(before, back_map), blurred))
        trust = (agree * np.exp(-((mismatch / PHOTO_SIGMA) ** 2))).astype(np.float32)
        if TRUST_FEATHER > 0:
            trust = cv2.GaussianBlur(trust, (0, 0), TRUST_FEATHER)
        cut = float(trust.mean()) < CUT_SHARE
        return Motion(back_map, np.zeros_like(trust) if cut else trust, cut, covered)


class Steadier:
    """The recursive blend of painted frames along the input's motion. Feed frames in order."""

    def __init__(self, alpha: float = ALPHA, sharpness_target: float | None = None) -> None:
        self.alpha = alpha
        self.sharpness_target = SHARPNESS_TARGET if sharpness_target is None else sharpness_target
        self.cubic_share = CUBIC_SHARE  # steered per clip, see SHARPNESS_TARGET
        self._previous: np.ndarray | None = None  # the last output, float32

    def next(self, painted: np.ndarray, motion: Motion | None) -> np.ndarray:
        """The steady frame for ``painted`` (uint8 (H, W, C)), given the motion onto it (None: a fresh start)."""
        current = painted.astype(np.float32)
        previous = self._previous
        if motion is None or motion.cut or previous is None or previous.shape != current.shape:
            out = current
        else:
            # Resampled every frame: bicubic alone sharpens the carried picture a little each time and bilinear
            # softens it, so the two are mixed (the share) to hold it as sharp as wanted.
            share = self.cubic_share
            carried = warp(previous, motion.back_map, cv2.INTER_CUBIC)
            if share != 1.0:
                carried *= share
                carried += (1.0 - share) * warp(previous, motion.back_map, cv2.INTER_LINEAR)
            np.clip(carried, 0, 255, out=carried)
            fresh = current
            if motion.covered is not None and MOVING_DETAIL_SIGMA > 0:
                fresh = _steadied_moving(current, carried, (1.0 - motion.trust) * motion.covered)
            weight = (self.alpha * motion.trust)[..., None]
            out = carried - fresh
            out *= weight
            out += fresh
            if self.sharpness_target > 0:
                shortfall = self.sharpness_target - _mean_gradient(out) / max(_mean_gradient(current), 1e-3)
                low, high = SHARE_RANGE
                self.cubic_share = min(high, max(low, 1.0 + SHARE_GAIN * shortfall))
        self._previous = out
        return cv2.convertScaleAbs(out)  # rounds and saturates to uint8 (out is never negative)


def _steadied_moving(fresh: np.ndarray, carried: np.ndarray, moving: np.ndarray) -> np.ndarray:
    """``fresh`` where ``moving`` (H, W, in [0, 1]) is up: its fine detail taken away and its broad shapes
    following ``carried``'s, see :data:`MOVING_DETAIL_SIGMA`. Worked out only in one box round the moving pixels
    (usually a small part of the frame), the blurs at half size. The blurs and the resizes are linear, so the
    softened painting and the carried picture's shapes are one half-size sum, brought back to full size once:
    G₃(fresh) + G₅(carried − fresh), each Gaussian at half its sigma on the half-size copies."""
    rows, cols = np.nonzero(moving[::4, ::4] > _MOVING_FLOOR)  # a quarter of the pixels say where to look
    if not len(rows):
        return fresh
    h, w = moving.shape
    pad = 4 + 3 * round(max(MOVING_DETAIL_SIGMA, MOVING_SHAPE_SIGMA))
    y0, y1 = max(0, 4 * rows.min() - pad), min(h, 4 * rows.max() + 4 + pad)
    x0, x1 = max(0, 4 * cols.min() - pad), min(w, 4 * cols.max() + 4 + pad)
    out = fresh.copy()
    window = out[y0:y1, x0:x1]
    wh, ww = window.shape[:2]
    if min(wh, ww) < 8:
        low = cv2.GaussianBlur(window, (0, 0), MOVING_DETAIL_SIGMA)
        if MOVING_SHAPE_SIGMA > 0:
            low += cv2.GaussianBlur(carried[y0:y1, x0:x1] - window, (0, 0), MOVING_SHAPE_SIGMA)
    else:
        half = ((ww + 1) // 2, (wh + 1) // 2)
        small = cv2.resize(window, half, interpolation=cv2.INTER_AREA)
        low = cv2.GaussianBlur(small, (0, 0), MOVING_DETAIL_SIGMA / 2)
        if MOVING_SHAPE_SIGMA > 0:
            shapes = cv2.resize(carried[y0:y1, x0:x1], half, interpolation=cv2.INTER_AREA)
            shapes -= small
            low += cv2.GaussianBlur(shapes, (0, 0), MOVING_SHAPE_SIGMA / 2)
        low = cv2.resize(low, (ww, wh), interpolation=cv2.INTER_LINEAR)
    low -= window
    low *= moving[y0:y1, x0:x1, None]
    window += low
    return out


def _mean_gradient(image: np.ndarray) -> float:
    grey = cv2.cvtColor(image[..., :3].astype(np.float32, copy=False), cv2.COLOR_RGB2GRAY)
    return float(cv2.magnitude(cv2.Sobel(grey, cv2.CV_32F, 1, 0), cv2.Sobel(grey, cv2.CV_32F, 0, 1)).mean())


# ---- how steady a clip is ---------------------------------------------------------------------------------


def _farneback(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Dense flow from grey ``a`` to grey ``b`` (a(x) ≈ b(x + flow)): a different method from the one above, so
    the measurement does not grade its own flow."""
    return cv2.calcOpticalFlowFarneback(a, b, None, 0.5, 4, 15, 5, 5, 1.1, 0)


def warping_error(inputs: list[np.ndarray], outputs: list[np.ndarray]) -> float:
    """Lai et al. 2018's warping error of ``outputs`` (RGB uint8 frames) along the motion of ``inputs``: output
    t−1 moved onto frame t by the input's flow, pixels that fail the flows' consistency check left out, the mean
    squared difference with values in [0, 1], averaged over the frame pairs. ``warping_error(x, x)`` is the input's
    own, about the floor a steady result can reach since the flow has errors of its own."""
    return warping_errors(inputs, [outputs])[0]


def warping_errors(inputs: list[np.ndarray], paintings: list[list[np.ndarray]]) -> list[float]:
    """:func:`warping_error` of each of several paintings of the same ``inputs``, the flows worked out once."""
    errors: list[list[float]] = [[] for _ in paintings]
    for t in range(1, len(inputs)):
        a, b = (cv2.cvtColor(inputs[i], cv2.COLOR_RGB2GRAY) for i in (t - 1, t))
        back, forward = _farneback(b, a), _farneback(a, b)
        h, w = back.shape[:2]
        mask = consistent(back, forward)
        grid = _grid(h, w) + back
        for outputs, found in zip(paintings, errors, strict=True):
            moved = warp(outputs[t - 1][..., :3].astype(np.float32) / 255, grid)
            diff = (outputs[t][..., :3].astype(np.float32) / 255 - moved) ** 2
            found.append(float(diff[mask].mean()) if mask.any() else 0.0)
    return [float(np.mean(found)) if found else 0.0 for found in errors]


def sharpness(frames: list[np.ndarray]) -> float:
    """Mean gradient magnitude (Sobel, grey, 0–255) over the frames: a blend that blurs shows here."""
    return float(np.mean([_mean_gradient(frame) for frame in frames]))
