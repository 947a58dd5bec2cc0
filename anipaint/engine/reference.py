"""The reference AnimeGANv2 generator: plain eager PyTorch fp32 functional calls, no tricks.

This is the yardstick of issue #6: every faster backend is timed against it in the same run and must match its
output (PSNR ≥ 35 dB on real photos). It reads the same state dict as :mod:`anipaint.networks.animeganv2` and
computes the same function (reflect pad → conv → GroupNorm(1) with eps 1e-12 → LeakyReLU(0.2), TF1 bilinear 2x),
written as one ``F.*`` call per op so that it is obviously the naive float network.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from anipaint.networks.animeganv2 import LAYER_NORM_EPS, pad_input, resize_bilinear_tf1

StateDict = dict[str, Tensor]

# (prefix, stride, padding (l, r, t, b)) of every ConvNormLReLU outside the inverted-residual blocks.
_S2 = (0, 1, 0, 1)  # TF "SAME" for stride 2 on even sizes: pad right and bottom only


def _cnl(sd: StateDict, prefix: str, x: Tensor, pad: tuple[int, int, int, int], stride: int = 1) -> Tensor:
    w = sd[f"{prefix}.1.weight"]
    if any(pad):
        x = F.pad(x, pad, mode="reflect")
    groups = x.shape[1] if w.shape[1] == 1 and x.shape[1] > 1 else 1
    x = F.conv2d(x, w, sd.get(f"{prefix}.1.bias"), stride=stride, groups=groups)
    x = F.group_norm(x, 1, sd[f"{prefix}.2.weight"], sd[f"{prefix}.2.bias"], eps=LAYER_NORM_EPS)
    return F.leaky_relu(x, 0.2)


def _same(k: int) -> tuple[int, int, int, int]:
    p = k // 2
    return (p, p, p, p)


def _inverted_residual(sd: StateDict, prefix: str, x: Tensor) -> Tensor:
    out = _cnl(sd, f"{prefix}.layers.0", x, (0, 0, 0, 0))
    out = _cnl(sd, f"{prefix}.layers.1", out, _same(3))
    out = F.conv2d(out, sd[f"{prefix}.layers.2.weight"])
    out = F.group_norm(out, 1, sd[f"{prefix}.layers.3.weight"], sd[f"{prefix}.layers.3.bias"], eps=LAYER_NORM_EPS)
    return x + out if out.shape == x.shape else out


def reference_forward(sd: StateDict, x: Tensor) -> Tensor:
    """NCHW float32 RGB in [-1, 1] → same shape in [-1, 1]; any H, W ≥ 8."""
    h, w = x.shape[-2:]
    x = pad_input(x)  # the input handling is not the network: shared with networks.animeganv2
    x = _cnl(sd, "block_a.0", x, _same(7))
    x = _cnl(sd, "block_a.1", x, _S2, stride=2)
    x = _cnl(sd, "block_a.2", x, _same(3))
    x = _cnl(sd, "block_b.0", x, _S2, stride=2)
    x = _cnl(sd, "block_b.1", x, _same(3))
    x = _cnl(sd, "block_c.0", x, _same(3))
    for i in range(1, 5):
        x = _inverted_residual(sd, f"block_c.{i}", x)
    x = _cnl(sd, "block_c.5", x, _same(3))
    x = resize_bilinear_tf1(x, (2 * x.shape[-2], 2 * x.shape[-1]))
    x = _cnl(sd, "block_d.0", x, _same(3))
    x = _cnl(sd, "block_d.1", x, _same(3))
    x = resize_bilinear_tf1(x, (2 * x.shape[-2], 2 * x.shape[-1]))
    x = _cnl(sd, "block_e.0", x, _same(3))
    x = _cnl(sd, "block_e.1", x, _same(3))
    x = _cnl(sd, "block_e.2", x, _same(7))
    x = torch.tanh(F.conv2d(x, sd["out_layer.0.weight"]))
    return x[..., :h, :w]


class ReferenceV2:
    """Callable wrapper: ``ReferenceV2(state_dict)(x)`` under ``torch.inference_mode``."""

    def __init__(self, state_dict: StateDict) -> None:
        self.sd = {k: v.detach().float().contiguous() for k, v in state_dict.items()}

    def __call__(self, x: Tensor) -> Tensor:
        with torch.inference_mode():
            return reference_forward(self.sd, x)
