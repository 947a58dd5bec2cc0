"""Which dtype a convolution runs in: the fast one (bfloat16 where the CPU multiplies it natively) except where
rounding would show in the picture.

A box filter (a depthwise convolution whose taps are all equal) computes local moments: White-box's guided filter
takes a variance as E[x²] − E[x]² from two of them. With bfloat16's 8-bit mantissa that difference cancels to
noise in flat regions (sky, walls), seen as white and magenta speckles; such filters cost next to nothing, so
they always run in float32.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .cpu import has_native_bf16


def fast_conv_dtype() -> torch.dtype:
    """bfloat16 where the CPU multiplies bf16 natively, float32 elsewhere (oneDNN emulates it ~10x slower)."""
    return torch.bfloat16 if has_native_bf16() else torch.float32


def is_box_filter(weight: Tensor) -> bool:
    """A depthwise (OIHW, one input channel per group) kernel with all of each channel's taps equal."""
    if weight.dim() != 4 or weight.shape[1] != 1 or weight.shape[-1] * weight.shape[-2] == 1:
        return False
    flat = weight.detach().reshape(weight.shape[0], -1)
    return bool(torch.equal(flat, flat[:, :1].expand_as(flat)))


def conv_dtype(weight: Tensor, fast: torch.dtype) -> torch.dtype:
    """The dtype a convolution with this OIHW ``weight`` runs in when the network's convolutions run in ``fast``."""
    return torch.float32 if is_box_filter(weight) else fast
