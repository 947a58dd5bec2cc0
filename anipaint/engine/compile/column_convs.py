"""Narrow, wide convolutions run by columns in the compiled form (:class:`~.graph_program.ExportableGraph`).

oneDNN computes output channels in blocks of 16 on AVX-512 (8 on AVX2), so a convolution to three channels
costs what one to sixteen does: the last 7 × 7 layer of an AnimeGANv3 generator took 29 ms of a 233 ms picture
at 512 px on two Zen 4 cores. Run instead as one kh × 1 convolution to out × kw channels (each output channel's
kernel columns side by side) and the kw partial sums shifted and added, it is 2 blocks × 7 taps instead of
1 block × 49: 9 ms plus a 6 ms sum that Inductor fuses with the tanh after it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from anipaint.networks.ir import Node

_ONES = [1, 1, 1, 1]


def by_columns_pays(node: Node, weight: Tensor) -> bool:
    """Whether a stride-1, undilated convolution with OIHW ``weight`` needs fewer 16-channel blocks × taps
    by columns than whole."""
    out, _, _, kw = weight.shape
    plain = (node.op == "Conv2D" and [int(v) for v in node.attrs.get("strides", _ONES)] == _ONES
             and [int(v) for v in node.attrs.get("dilations", _ONES)] == _ONES)
    return plain and kw > 1 and math.ceil(out * kw / 16) < kw * math.ceil(out / 16)


def column_weight(weight: Tensor) -> Tensor:
    """OIHW ``weight`` as kh × 1 kernels: channel ``o * kw + j`` is column j of output channel o."""
    out, cin, kh, kw = weight.shape
    return weight.permute(0, 3, 1, 2).reshape(out * kw, cin, kh, 1)


def conv_by_columns(x: Tensor, weight: Tensor, kw: int, bias: Tensor | None) -> Tensor:
    """The convolution of already padded float32 ``x`` by :func:`column_weight`'s ``weight``, in float32."""
    groups = x.shape[1] // weight.shape[1]  # a group's channels stay together: o * kw + j is o-major
    # a kh × 1 kernel's strides fit either memory format, so ask for the producer's channels-last layout;
    # otherwise Inductor may pick NCHW and slow the loops that write x
    x = x.to(weight.dtype).contiguous(memory_format=torch.channels_last)
    parts = F.conv2d(x, weight, groups=groups).float().unflatten(1, (-1, kw))
    width = x.shape[-1] - kw + 1
    y = sum(parts[:, :, j, :, j:j + width] for j in range(kw))
    if bias is not None:
        y = y + bias.float().view(1, -1, 1, 1)
    return y
