"""Size alignment: every network pads its input at the bottom/right to a multiple of its total stride.

Strided convolutions and 2x resizes only meet again at the same size when each stride level divides evenly, so
a network pads to its multiple and crops its output back to the input's size. Reflection keeps the border
statistics close to the picture's own; a picture smaller than the pad falls back to repeating the edge.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def alignment_padding(height: int, width: int, multiple: int, min_cells: int = 1) -> tuple[int, int]:
    """Rows and columns to add so both sides are multiples of ``multiple`` and at least ``min_cells`` of them
    (2 for networks whose deepest level reflect-pads by one pixel: a single cell has nothing to reflect)."""

    def target(n: int) -> int:
        return max(-(-n // multiple) * multiple, min_cells * multiple)

    return target(height) - height, target(width) - width


def pad_to_multiple(x: Tensor, multiple: int, min_cells: int = 1) -> Tensor:
    """NCHW ``x`` padded by :func:`alignment_padding`; crop the network's output back with ``[..., :h, :w]``."""
    h, w = x.shape[-2:]
    pad_h, pad_w = alignment_padding(h, w, multiple, min_cells)
    if pad_h or pad_w:
        mode = "reflect" if pad_h < h and pad_w < w else "replicate"
        x = F.pad(x, (0, pad_w, 0, pad_h), mode=mode)
    return x
