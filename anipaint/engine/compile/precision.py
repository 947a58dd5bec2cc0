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

from anipaint.engine.runtime.cpu import has_native_bf16
from anipaint.networks.ir import Graph, Node


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


def read_by_bf16_convs_only(graph: Graph, bf16_convs: set[str]) -> set[str]:
    """The nodes whose values are read only as the input of convolutions in ``bf16_convs``, directly or through
    pads: storing them in bfloat16 rounds them as those convolutions would."""
    readers: dict[str, list[tuple[Node, int]]] = {}
    for node in graph.nodes:
        for i, name in enumerate(node.inputs):
            readers.setdefault(name, []).append((node, i))
    memo: dict[str, bool] = {}

    def only_bf16(name: str) -> bool:
        if name not in memo:
            memo[name] = name not in graph.outputs and bool(readers.get(name)) and all(
                i == 0 and (node.name in bf16_convs or node.op in ("MirrorPad", "Pad") and only_bf16(node.name))
                for node, i in readers[name])
        return memo[name]

    return {node.name for node in graph.nodes if only_bf16(node.name)}
