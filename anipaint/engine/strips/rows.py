"""The row geometry of graph ops on strips: where a value's rows are, and which input rows an op's rows need.

Shared by the plan (:mod:`.graph_plan`) and the runner (:mod:`.graph_run`).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np
import torch

from anipaint.engine.strips.row_sources import reflect
from anipaint.networks.graph_exec import Val
from anipaint.networks.graph_ops import resize_axis, same_padding
from anipaint.networks.ir import Node

POINTWISE = {"Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "FloorDiv", "SquaredDifference", "Maximum", "Minimum",
             "Pow", "Identity", "StopGradient", "Sqrt", "Rsqrt", "Tanh", "Relu", "Relu6", "Sigmoid", "Neg",
             "Square", "Exp", "Abs", "LeakyRelu", "BiasAdd", "Cast"}
RESHAPES = {"Reshape", "ExpandDims", "Squeeze"}
CONVS = {"Conv2D", "DepthwiseConv2dNative"}
PADS = {"MirrorPad", "Pad", "PadV2"}
REDUCTIONS = {"Mean", "Sum"}


class NoStripPlan(ValueError):
    """The graph holds an op the strip executor can't run over row strips."""


@dataclass(frozen=True)
class Tag:
    """Where a spatial value's rows are: axes ``axis, axis + 1`` are (H, W), or ``axis`` is H*W row-major."""

    axis: int
    flat: bool
    height: int
    width: int

    def positions(self) -> set[int]:
        return {self.axis} if self.flat else {self.axis, self.axis + 1}


def meta_shortcut(node: Node, args: list[Val]) -> Val | None:
    """The result shape of an element-wise op or a reduction without running torch's (slow) meta kernels."""
    if node.op in POINTWISE and node.op != "Cast":
        shape = torch.broadcast_shapes(*(a.nhwc().shape for a in args if a.t.dim() > 0 or len(args) == 1))
        return Val(torch.empty(shape, device="meta"), False)
    if node.op in REDUCTIONS:
        shape = list(args[0].nhwc().shape)
        axes = {a % len(shape) for a in args[1].ints()}
        keep = bool(node.attrs.get("keep_dims", False))
        shape = [1 if d in axes else n for d, n in enumerate(shape) if keep or d not in axes]
        return Val(torch.empty(shape, device="meta"), False)
    return None


def mirror(index: np.ndarray, n: int, mode: str) -> np.ndarray:
    """Row indices reflected into ``[0, n)``: REFLECT without repeating the edge, SYMMETRIC repeating it."""
    if mode.upper() == "REFLECT":
        return reflect(index, n)
    index = np.where(index < 0, -index - 1, index)
    return np.where(index >= n, 2 * n - 1 - index, index)


def is_pointwise_conv(node: Node, weight: torch.Tensor) -> bool:
    strides = [int(s) for s in node.attrs.get("strides", [1, 1, 1, 1])]
    return weight.shape[0] == 1 and weight.shape[1] == 1 and strides[1] == strides[2] == 1


def reshaped(tag: Tag, shape_in: list[int], shape_out: list[int], name: str) -> Tag:
    """Where the positions go through a reshape (rows and columns kept, merged or split back)."""
    lead = prod(shape_in[: tag.axis])
    span = 1 if tag.flat else 2
    trail = prod(shape_in[tag.axis + span:])
    positions = tag.height * tag.width
    for j in range(len(shape_out)):
        if prod(shape_out[:j]) != lead:
            continue
        if shape_out[j] == positions and prod(shape_out[j + 1:]) == trail:
            return Tag(j, True, tag.height, tag.width)
        if j + 1 < len(shape_out) and shape_out[j:j + 2] == [tag.height, tag.width] \
                and prod(shape_out[j + 2:]) == trail:
            return Tag(j, False, tag.height, tag.width)
    raise NoStripPlan(f"Reshape {name}: {shape_in} -> {shape_out} mixes positions with other axes")


def conv_rows(plan, node: Node) -> tuple[torch.Tensor, int, int, int, int]:
    """A convolution's filter (HWIO/HWCM) and its row geometry: kernel height, stride, dilation, top padding."""
    weight = plan.value(node.inputs[1]).nhwc()
    k = int(weight.shape[0])
    stride = int(node.attrs.get("strides", [1, 1, 1, 1])[1])
    dilation = int(node.attrs.get("dilations", [1, 1, 1, 1])[1])
    padding = node.attrs.get("padding", "VALID")
    height = plan.shape[node.inputs[0]][1]
    if padding == "SAME":
        top = same_padding(height, k, stride, dilation)[0]
    elif padding == "EXPLICIT":
        top = int(node.attrs["explicit_paddings"][2])
    else:
        top = 0
    return weight, k, stride, dilation, top


def resize_rows(plan, node: Node) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Source rows (lower, upper) and weights of every output row of a ResizeBilinear, as TF computes them."""
    lo, hi, frac = resize_axis(plan.shape[node.inputs[0]][1], plan.shape[node.name][1],
                                bool(node.attrs.get("align_corners", False)),
                                bool(node.attrs.get("half_pixel_centers", False)), torch.device("cpu"))
    return lo.numpy(), hi.numpy(), frac.numpy()
