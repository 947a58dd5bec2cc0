"""Large pictures in overlapping tiles, blended with feathered linear ramps, in bounded memory.

Tiles form a regular grid (the last row/column is moved flush with the picture's edge, so every tile has the
full size and the compiled backends see few distinct shapes). Each tile's weight is a product of two 1-D ramps
that rise across the overlap with the previous tile and fall across the overlap with the next, so the weights of
neighbouring tiles add up to one and the seams fade over the whole overlap; the sum of weights is divided out
anyway, so uneven overlaps are exact too. Output rows are finished one tile row at a time: memory is one band
of ``tile × width`` floats on top of the input and output pictures, whatever the height.

Known limit: the generators normalise each layer over the whole (tile) picture, so a tile is painted with its
own statistics, not the picture's. Context is not the issue (with the whole picture's statistics forced into
every tile, tiled and untiled agree to ~60 dB), the statistics are: tiles differ from the untiled painting by
20-34 dB PSNR (v1, v2, the v3 graphs) or ~40 dB (v3-cute), as smooth, feathered tone shifts rather than seams.
Every network that can therefore paints large pictures layer by layer instead (:mod:`anipaint.engine.strips`,
exactly); ``large_mode="tiles"`` and a network with no strip version still come here.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

ALIGN = 4  # tile origins on a multiple of 4, so the v2 networks' 1/2 and 1/4 grids line up across tiles


def needs_tiling(height: int, width: int, tile: int) -> bool:
    """Whether a picture is painted in tiles: more than four tiles' worth of pixels (1 MP for 512 px tiles).

    Up to that size the whole picture fits comfortably in memory and one pass is both faster and exact.
    """
    return tile > 0 and height * width > 4 * tile * tile


def starts(length: int, tile: int, overlap: int) -> list[int]:
    """Tile origins along one axis: step ``tile - overlap`` (rounded down to a multiple of 4), last one flush."""
    if length <= tile:
        return [0]
    step = max(ALIGN, (tile - overlap) // ALIGN * ALIGN)
    out = list(range(0, length - tile, step))
    out.append(length - tile)
    return sorted(set(out))


def ramp(size: int, rise: int, fall: int) -> np.ndarray:
    """Weights along one tile axis: 0→1 over the first ``rise`` pixels, 1→0 over the last ``fall``."""
    w = np.ones(size, np.float32)
    if rise > 0:
        w[:rise] = np.minimum(w[:rise], (np.arange(rise, dtype=np.float32) + 0.5) / rise)
    if fall > 0:
        w[size - fall :] = np.minimum(w[size - fall :], (fall - np.arange(fall, dtype=np.float32) - 0.5) / fall)
    return w


def _axis(length: int, tile: int, overlap: int) -> tuple[list[int], int, list[np.ndarray], np.ndarray]:
    """Origins, tile size, per-tile ramps and their sum along one axis."""
    size = min(tile, length)
    origin = starts(length, size, overlap)
    ramps = []
    total = np.zeros(length, np.float32)
    for i, o in enumerate(origin):
        rise = origin[i - 1] + size - o if i > 0 else 0
        fall = o + size - origin[i + 1] if i + 1 < len(origin) else 0
        r = ramp(size, rise, fall)
        ramps.append(r)
        total[o : o + size] += r
    return origin, size, ramps, total


def paint_tiled(
    rgb: np.ndarray, run: Callable[[Tensor], Tensor], tile: int, overlap: int,
    to_tensor: Callable[[np.ndarray], Tensor], from_tensor_float: Callable[[Tensor], np.ndarray],
    progress: Callable[[float], None] | None = None,
) -> np.ndarray:
    """Paint ``rgb`` (uint8 H×W×3) tile by tile with ``run`` (NCHW [-1, 1] → same) and blend the tiles.

    ``to_tensor`` turns a uint8 tile into the network's input, ``from_tensor_float`` a network output into
    float32 H×W×3 in [0, 255] (blending happens before rounding).
    """
    height, width = rgb.shape[:2]
    ys, th, ry, sy = _axis(height, tile, overlap)
    xs, tw, rx, sx = _axis(width, tile, overlap)
    out = np.empty((height, width, 3), np.uint8)
    carry: np.ndarray | None = None  # finished tile rows' contributions to rows not yet final
    for i, y0 in enumerate(ys):
        band = np.zeros((th, width, 3), np.float32)
        if carry is not None:
            band[: carry.shape[0]] += carry
        for j, x0 in enumerate(xs):
            with torch.inference_mode():
                painted = from_tensor_float(run(to_tensor(rgb[y0 : y0 + th, x0 : x0 + tw])))
            band[:, x0 : x0 + tw] += painted * (ry[i][:, None, None] * rx[j][None, :, None])
            if progress is not None:
                progress((i * len(xs) + j + 1) / (len(ys) * len(xs)))
        final = (ys[i + 1] if i + 1 < len(ys) else height) - y0  # rows of this band no later tile touches
        norm = sy[y0 : y0 + final, None, None] * sx[None, :, None]
        out[y0 : y0 + final] = np.clip(np.rint(band[:final] / norm), 0, 255).astype(np.uint8)
        carry = band[final:].copy() if final < th else None
    return out
