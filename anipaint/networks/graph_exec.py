"""The op table of :class:`~anipaint.networks.graph_module.GraphModule`: one torch function per IR op.

Each op takes the node and its input :class:`Val` s and returns a :class:`Val`. A ``Val`` holds a tensor and
whether that tensor is the NCHW permutation of the graph's logical NHWC value (see graph_module's docstring);
ops that care about layout ask for ``.nchw()`` or ``.nhwc()``, element-wise ops keep NCHW when an operand
has it and re-lay the other operand's broadcast shape to match.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from anipaint.networks.graph_ops import mirror_pad, resize_bilinear, same_padding, strided_slice
from anipaint.networks.ir import Graph, Node

_NHWC_TO_NCHW_AXIS = (0, 2, 3, 1)  # logical NHWC axis -> position in the NCHW tensor


class Val:
    """A graph value: ``t`` is NCHW-permuted when ``is_nchw`` (4-D feature maps only)."""

    __slots__ = ("t", "is_nchw")

    def __init__(self, t: Tensor, is_nchw: bool) -> None:
        self.t = t
        self.is_nchw = is_nchw and t.dim() == 4

    def nchw(self) -> Tensor:
        if self.is_nchw or self.t.dim() != 4:
            return self.t
        return self.t.permute(0, 3, 1, 2)

    def nhwc(self) -> Tensor:
        return self.t.permute(0, 2, 3, 1) if self.is_nchw else self.t

    def ints(self) -> list[int]:
        return [int(v) for v in self.nhwc().reshape(-1).tolist()]

    def scalar(self) -> int:
        return self.ints()[0]


@dataclass
class Context:
    graph: Graph
    shapes: Any  # graph_shapes.ShapeRebinder
    record: dict[str, Any] | None  # set on the reference run: logical input shapes of const-shaped nodes
    memo: dict[Any, Any]  # per run: how merged dims were split (see graph_shapes)
    at_reference: bool  # the input has the graph's reference shape: constant shapes hold as they are
    # the compiled form's rewrites in force (graph_compile.REWRITES): ops written as Inductor's C++ loops on
    # channels-last activations run them fastest, with the same values
    rewrites: frozenset[str] = frozenset()
    # nodes whose values only bfloat16 convolutions read (through pads): their upsamplings may store bfloat16,
    # which those convolutions would have rounded them to anyway
    stored_bf16: frozenset[str] = frozenset()


Op = Callable[[Context, Node, list[Val]], Val]
OPS: dict[str, Op] = {}


def op(*names: str) -> Callable[[Op], Op]:
    def register(fn: Op) -> Op:
        for name in names:
            OPS[name] = fn
        return fn

    return register


def _bcast_nchw(v: Val) -> Tensor:
    """An element-wise operand re-laid so that it broadcasts against NCHW tensors as it did against NHWC."""
    if v.is_nchw or v.t.dim() == 0:
        return v.t
    if v.t.dim() > 4:
        raise ValueError("element-wise operand of rank > 4 next to a feature map")
    return v.t.reshape([1] * (4 - v.t.dim()) + list(v.t.shape)).permute(0, 3, 1, 2)


def _binary(fn: Callable[[Tensor, Tensor], Tensor]) -> Op:
    def run(ctx: Context, node: Node, args: list[Val]) -> Val:
        a, b = args
        if a.is_nchw or b.is_nchw:
            return Val(fn(_bcast_nchw(a), _bcast_nchw(b)), True)
        return Val(fn(a.t, b.t), False)

    return run


def _unary(fn: Callable[[Tensor], Tensor]) -> Op:
    return lambda ctx, node, args: Val(fn(args[0].t), args[0].is_nchw)


for _name, _fn in {
    "Add": torch.add, "AddV2": torch.add, "Sub": torch.sub, "Mul": torch.mul,
    "RealDiv": torch.true_divide, "Div": torch.true_divide,
    "FloorDiv": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "SquaredDifference": lambda a, b: torch.square(a - b),
    "Maximum": torch.maximum, "Minimum": torch.minimum, "Pow": torch.pow,
}.items():
    OPS[_name] = _binary(_fn)

for _name, _fn in {
    "Identity": lambda t: t, "StopGradient": lambda t: t, "Sqrt": torch.sqrt, "Rsqrt": torch.rsqrt,
    "Relu": torch.relu, "Relu6": lambda t: t.clamp(0, 6), "Sigmoid": torch.sigmoid,
    "Neg": torch.neg, "Square": torch.square, "Exp": torch.exp, "Abs": torch.abs,
    "Reciprocal": torch.reciprocal, "Floor": torch.floor, "HardSwish": F.hardswish,
}.items():
    OPS[_name] = _unary(_fn)


@op("Tanh")
def _tanh(ctx: Context, node: Node, args: list[Val]) -> Val:
    t = args[0].t
    if "logistic_tanh" in ctx.rewrites:
        # a generator's last op, in a loop over three channels that Inductor leaves scalar: there tanh is
        # glibc's scalar tanhf, while the logistic's expf has FMA/AVX2 versions; the two differ by at most 2e-7
        return Val(2 * torch.sigmoid(2 * t) - 1, args[0].is_nchw)
    return Val(torch.tanh(t), args[0].is_nchw)


@op("LeakyRelu")
def _leaky_relu(ctx: Context, node: Node, args: list[Val]) -> Val:
    return Val(F.leaky_relu(args[0].t, float(node.attrs.get("alpha", 0.2))), args[0].is_nchw)


@op("Softmax")
def _softmax(ctx: Context, node: Node, args: list[Val]) -> Val:
    v = args[0]
    t = v.t * float(node.attrs["beta"]) if "beta" in node.attrs else v.t  # TFLite carries a beta
    return Val(torch.softmax(t, dim=1 if v.is_nchw else -1), v.is_nchw)


@op("Mean", "Sum")
def _reduce(ctx: Context, node: Node, args: list[Val]) -> Val:
    v, axes = args[0], args[1].ints()
    keep = bool(node.attrs.get("keep_dims", False))
    fn = torch.mean if node.op == "Mean" else torch.sum
    if not axes:
        return v
    if v.is_nchw and keep:  # per-channel statistics stay NCHW
        rank = 4
        dims = sorted(_NHWC_TO_NCHW_AXIS[a % rank] for a in axes)
        if "rows_first" in ctx.rewrites and dims == [2, 3]:
            # by rows, then over the rows' results: Inductor parallelises a reduction over its outer loop,
            # which for a whole picture's per-channel statistics is the channels' one vector
            return Val(fn(fn(v.t, dim=3, keepdim=True), dim=2, keepdim=True), True)
        return Val(fn(v.t, dim=dims, keepdim=True), True)
    t = v.nhwc()
    return Val(fn(t, dim=[a % t.dim() for a in axes], keepdim=keep), False)


def conv_pads(node: Node, x: Tensor, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int) -> list[int]:
    padding = node.attrs.get("padding", "VALID")
    if padding == "VALID":
        return [0, 0, 0, 0]
    if padding == "SAME":
        top, bottom = same_padding(x.shape[2], kh, sh, dh)
        left, right = same_padding(x.shape[3], kw, sw, dw)
        return [top, bottom, left, right]
    if padding == "EXPLICIT":
        p = [int(v) for v in node.attrs["explicit_paddings"]]
        return p[2:6]
    raise ValueError(f"{node.name}: padding {padding!r}")


@op("Conv2D", "DepthwiseConv2dNative")
def _conv(ctx: Context, node: Node, args: list[Val]) -> Val:
    if node.attrs.get("data_format", "NHWC") != "NHWC":
        raise NotImplementedError(f"{node.name}: data_format {node.attrs['data_format']}")
    x = args[0].nchw()
    w = args[1].nhwc()  # HWIO, or HWCM for depthwise
    kh, kw = int(w.shape[0]), int(w.shape[1])
    strides = [int(s) for s in node.attrs.get("strides", [1, 1, 1, 1])]
    dilations = [int(d) for d in node.attrs.get("dilations", [1, 1, 1, 1])]
    sh, sw, dh, dw = strides[1], strides[2], dilations[1], dilations[2]
    if node.op == "Conv2D":
        weight = w.permute(3, 2, 0, 1)
        groups = x.shape[1] // w.shape[2]  # TF runs grouped convs when in_channels is a multiple
    else:
        channels, mult = int(w.shape[2]), int(w.shape[3])
        weight = w.permute(2, 3, 0, 1).reshape(channels * mult, 1, kh, kw)  # out channel c*M+m, as TF
        groups = channels
    top, bottom, left, right = conv_pads(node, x, kh, kw, sh, sw, dh, dw)
    if top == bottom and left == right:
        padding: tuple[int, int] = (top, left)
    else:  # TF's SAME puts the odd pixel bottom/right; conv2d only pads symmetrically
        x = F.pad(x, (left, right, top, bottom))
        padding = (0, 0)
    bias = args[2].t.reshape(-1) if len(args) > 2 else None  # TFLite-style fused bias, if an importer keeps it
    y = F.conv2d(x, weight.to(x.dtype), bias, (sh, sw), padding, (dh, dw), groups)
    return Val(y, True)


@op("Conv2DBackpropInput")
def _conv_transpose(ctx: Context, node: Node, args: list[Val]) -> Val:
    """TF's transposed convolution: inputs (output sizes NHWC, filter [H, W, out, in], value)."""
    size, w, x = args[0].ints(), args[1].nhwc(), args[2].nchw()
    strides = [int(s) for s in node.attrs.get("strides", [1, 1, 1, 1])]
    sh, sw = strides[1], strides[2]
    y = F.conv_transpose2d(x, w.permute(3, 2, 0, 1).to(x.dtype), None, (sh, sw))  # full: (in - 1) * s + k
    out_h, out_w = size[1], size[2]
    top, left = (same_padding(out_h, w.shape[0], sh)[0], same_padding(out_w, w.shape[1], sw)[0]) \
        if node.attrs.get("padding") == "SAME" else (0, 0)
    y = y[..., top : top + out_h, left : left + out_w]
    if y.shape[-2] < out_h or y.shape[-1] < out_w:  # kernel smaller than the stride: zeros at the end
        y = F.pad(y, (0, out_w - y.shape[-1], 0, out_h - y.shape[-2]))
    return Val(y, True)


@op("BiasAdd")
def _bias_add(ctx: Context, node: Node, args: list[Val]) -> Val:
    v, b = args[0], args[1].t.reshape(-1)
    if v.is_nchw:
        return Val(v.t + b.view(1, -1, 1, 1), True)
    return Val(v.t + b, False)


@op("MirrorPad", "Pad", "PadV2")
def _pad(ctx: Context, node: Node, args: list[Val]) -> Val:
    v = args[0]
    p = args[1].ints()
    pads = [(p[2 * i], p[2 * i + 1]) for i in range(len(p) // 2)]
    if v.is_nchw:
        t, pads = v.t, [pads[_NHWC_TO_NCHW_AXIS.index(d)] for d in range(4)]  # NCHW order
    else:
        t = v.t
    if node.op == "MirrorPad":
        return Val(mirror_pad(t, pads, str(node.attrs.get("mode", "REFLECT"))), v.is_nchw)
    flat = [x for d in reversed(range(t.dim())) for x in pads[d]]
    value = float(args[2].t.reshape(-1)[0]) if len(args) > 2 else 0.0
    return Val(F.pad(t, flat, value=value), v.is_nchw)


@op("ResizeBilinear")
def _resize(ctx: Context, node: Node, args: list[Val]) -> Val:
    v, size = args[0], args[1].ints()
    if node.name in ctx.shapes.const_nodes:  # constant size: exported for one input size
        if ctx.record is not None:
            ctx.record[node.name] = list(v.nhwc().shape)
        elif not ctx.at_reference:
            size = ctx.shapes.resize(node.name, size, list(v.nhwc().shape))
    y = resize_bilinear(v.nchw(), (size[0], size[1]), bool(node.attrs.get("align_corners", False)),
                        bool(node.attrs.get("half_pixel_centers", False)), "quad_upsample" in ctx.rewrites,
                        torch.bfloat16 if node.name in ctx.stored_bf16 else None)
    return Val(y, True)


@op("Reshape")
def _reshape(ctx: Context, node: Node, args: list[Val]) -> Val:
    t, shape = args[0].nhwc(), args[1].ints()
    if node.name in ctx.shapes.const_nodes:
        if ctx.record is not None:
            ctx.record[node.name] = list(t.shape)
        elif not ctx.at_reference:
            shape = ctx.shapes.reshape(node.name, shape, list(t.shape), ctx.memo)
    return Val(t.reshape(shape), False)


@op("Transpose")
def _transpose(ctx: Context, node: Node, args: list[Val]) -> Val:
    return Val(args[0].nhwc().permute(args[1].ints()), False)


@op("Shape")
def _shape(ctx: Context, node: Node, args: list[Val]) -> Val:
    return Val(torch.tensor(list(args[0].nhwc().shape), dtype=torch.int64), False)


@op("StridedSlice")
def _strided_slice(ctx: Context, node: Node, args: list[Val]) -> Val:
    masks = {k: int(node.attrs.get(k, 0)) for k in
             ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}
    y = strided_slice(args[0].nhwc(), args[1].ints(), args[2].ints(), args[3].ints(), **masks)
    return Val(y, False)


@op("Pack")
def _pack(ctx: Context, node: Node, args: list[Val]) -> Val:
    ts = [a.nhwc() for a in args]
    if not all(t.is_floating_point() for t in ts):  # shape arithmetic: one integer dtype
        ts = [t.long() for t in ts]
    axis = int(node.attrs.get("axis", 0))
    return Val(torch.stack(ts, dim=axis % (ts[0].dim() + 1)), False)


@op("ConcatV2", "Concat")
def _concat(ctx: Context, node: Node, args: list[Val]) -> Val:
    values, axis = args[:-1], args[-1].scalar()
    if all(v.is_nchw for v in values):
        return Val(torch.cat([v.t for v in values], dim=_NHWC_TO_NCHW_AXIS[axis % 4]), True)
    ts = [v.nhwc() for v in values]
    if not all(t.is_floating_point() for t in ts):
        ts = [t.long() for t in ts]
    return Val(torch.cat(ts, dim=axis % ts[0].dim()), False)


@op("GatherV2")
def _gather(ctx: Context, node: Node, args: list[Val]) -> Val:
    t, idx = args[0].nhwc(), args[1].t.long()
    axis = args[2].scalar() % t.dim() if len(args) > 2 else 0
    y = torch.index_select(t, axis, idx.reshape(-1))
    return Val(y.reshape(list(t.shape[:axis]) + list(idx.shape) + list(t.shape[axis + 1:])), False)


@op("Split")
def _split(ctx: Context, node: Node, args: list[Val]) -> Val:
    """One output of TF's Split (IR nodes have one output each): part ``output_index`` of ``num_split``."""
    axis, v = args[0].scalar(), args[1]
    n, k = int(node.attrs["num_split"]), int(node.attrs.get("output_index", 0))
    if v.is_nchw:
        return Val(torch.chunk(v.t, n, dim=_NHWC_TO_NCHW_AXIS[axis % 4])[k], True)
    t = v.t
    return Val(torch.chunk(t, n, dim=axis % t.dim())[k], False)


@op("Range")
def _range(ctx: Context, node: Node, args: list[Val]) -> Val:
    start, limit, delta = (a.t.reshape(-1)[0].item() for a in args)
    return Val(torch.arange(start, limit, delta), False)


@op("ExpandDims")
def _expand_dims(ctx: Context, node: Node, args: list[Val]) -> Val:
    t, dim = args[0].nhwc(), args[1].scalar()
    return Val(t.unsqueeze(dim % (t.dim() + 1)), False)


@op("Squeeze")
def _squeeze(ctx: Context, node: Node, args: list[Val]) -> Val:
    t = args[0].nhwc()
    dims = [int(d) % t.dim() for d in node.attrs.get("squeeze_dims", [])]
    if not dims:
        dims = [d for d in range(t.dim()) if t.shape[d] == 1]
    for d in sorted(dims, reverse=True):
        t = t.squeeze(d)
    return Val(t, False)


_CASTS = {"DT_FLOAT": torch.float32, "DT_HALF": torch.float32, "DT_DOUBLE": torch.float32,
          "DT_INT32": torch.int64, "DT_INT64": torch.int64, "DT_BOOL": torch.bool}


@op("Cast")
def _cast(ctx: Context, node: Node, args: list[Val]) -> Val:
    dtype = _CASTS[str(node.attrs.get("DstT", "DT_FLOAT"))]
    return Val(args[0].t.to(dtype), args[0].is_nchw)
