"""An imported graph as a clean torch program that ``torch.export`` can trace with symbolic H and W.

:class:`~anipaint.networks.graph_module.GraphModule` evaluates a graph's shape arithmetic (Shape → StridedSlice
→ Pack → Reshape / ResizeBilinear) on small integer tensors, read back with ``.tolist()``: fine eagerly, but a
tracer sees data-dependent values there and gives up. :class:`ExportableGraph` runs the same op table with the
shape values held as Python numbers instead (:mod:`.shape_values`), so under ``torch.export`` they become symbolic
sizes and one exported program serves every input size that is a multiple of the graph's stride. Everything
else is the executor's own ops, plus a few choices made once, ahead of time, for speed:

* convolution weights are re-laid to OIHW once (channels-last memory, so oneDNN runs every convolution on NHWC
  activations without reorders and Inductor fuses the norm / LeakyReLU / pad chains between them);
* convolutions optionally run in bfloat16 (``conv_dtype``), their outputs cast back to float32 for the norms:
  the casts fuse into the neighbouring loops, so the activations between layers are stored in bfloat16. The
  named torch networks (AnimeGAN v1) get the same through :class:`CastConv`.

Graphs with *constant* Reshape / ResizeBilinear shapes (a TFLite export tied to one size) are not exportable
this way (:func:`exportable` says why); they keep running eagerly.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from anipaint.engine.compile import column_convs, padded_upsample, precision
from anipaint.engine.compile.inductor import compile_package
from anipaint.engine.compile.shape_values import ShapeValues, shape_op
from anipaint.engine.tensors import from_tensor
from anipaint.networks import graph_exec
from anipaint.networks.graph_exec import Val
from anipaint.networks.graph_module import GraphModule
from anipaint.networks.ir import Graph, Node
from anipaint.quality import faithful, far_share, psnr

MIN_MULTIPLES = 3  # the exported programs take H and W of at least this many size multiples
FIXED_SIDE = 512  # the size a graph that can't take symbolic sizes is exported at (and every export's example)
FIXED_SIZE_KEY = "anipaint.fixed_size"  # package metadata: "HxW" when the program runs at that size only


def exportable(graph: Graph) -> str | None:
    """Why this graph can't be exported with symbolic sizes (None when it can)."""
    from anipaint.networks.graph_shapes import ShapeRebinder

    if ShapeRebinder(graph).const_nodes:
        return "its Reshape/ResizeBilinear shapes are constants of one input size"
    unknown = sorted({n.op for n in graph.nodes} - set(graph_exec.OPS) - {"Placeholder", "Const"})
    if unknown:
        return f"unsupported ops {', '.join(unknown)}"
    return None


# The compiled form's rewrites, in the order they were measured (docs/benchmarks.md): each gives the eager graph's
# values (the float32 ones to rounding, the bfloat16 one bit for bit) in loops Inductor runs faster.
REWRITES = (
    "quad_upsample",  # 2x upsampling interleaved in channels-last order (graph_ops._double_channels_last)
    "columns",  # narrow, wide convolutions by columns (column_convs)
    "rows_first",  # per-channel statistics over the picture reduced by rows first
    "logistic_tanh",  # tanh as 2 sigmoid(2x) - 1
    "bf16_upsample",  # upsamplings that only bf16 convolutions read stored in bf16
    "padded_upsample",  # a 2x upsampling and the reflect pad after it as one loop (padded_upsample)
)


class ExportableGraph(nn.Module):
    """``forward(x: NCHW float32, H and W multiples of size_multiple) -> NCHW float32``, export-friendly."""

    def __init__(self, module: GraphModule, conv_dtype: torch.dtype = torch.float32,
                 rewrites: Iterable[str] = (), float_convs: Iterable[str] = ()) -> None:
        """``float_convs``: convolutions (node names) kept in float32 whatever ``conv_dtype`` is, for int8
        quantisation to annotate (:mod:`.int8_graph`)."""
        super().__init__()
        float_convs = frozenset(float_convs)
        self.rewrites = frozenset(rewrites)
        if self.rewrites - set(REWRITES):
            raise ValueError(f"unknown rewrites {sorted(self.rewrites - set(REWRITES))}")
        graph = module.graph
        why = exportable(graph)
        if why:
            raise ValueError(f"graph not exportable: {why}")
        self.graph = graph
        self.size_multiple = module.size_multiple
        self.shapes = module.shapes  # no constant shapes (see exportable): every size runs as exported
        self.conv_dtype = conv_dtype
        self._ints: dict[str, ShapeValues] = {}
        self._scalars: dict[str, ShapeValues] = {}  # small float constants, as numbers for shape arithmetic
        self._keys: dict[str, str] = {}
        self._convs: dict[str, tuple[str, str | None]] = {}
        self._columns: dict[str, int] = {}  # convolutions run by columns: their kernel width
        consts = graph.consts
        for i, (name, value) in enumerate(consts.items()):
            arr = np.asarray(value)
            if arr.dtype.kind in "iub":
                self._ints[name] = ShapeValues([int(v) for v in arr.reshape(-1)], arr.shape)
            else:
                if arr.size <= 4:
                    self._scalars[name] = ShapeValues([float(v) for v in arr.reshape(-1)], arr.shape)
                key = f"c{i}"
                self.register_buffer(key, torch.from_numpy(np.array(arr, np.float32)), persistent=False)
                self._keys[name] = key
        for node in graph.nodes:  # convolution weights re-laid once: OIHW, channels-last, conv dtype
            if node.op in ("Conv2D", "DepthwiseConv2dNative") and node.inputs[1] in consts:
                w = torch.from_numpy(np.array(consts[node.inputs[1]], np.float32))
                if node.op == "Conv2D":
                    weight = w.permute(3, 2, 0, 1)
                else:
                    kh, kw, c, m = w.shape
                    weight = w.permute(2, 3, 0, 1).reshape(c * m, 1, kh, kw)
                key = f"w{len(self._convs)}"
                dtype = torch.float32 if node.name in float_convs else precision.conv_dtype(weight, conv_dtype)
                if "columns" in self.rewrites and column_convs.by_columns_pays(node, weight):
                    self._columns[node.name] = weight.shape[-1]
                    weight = column_convs.column_weight(weight)
                self.register_buffer(key, weight.to(dtype).contiguous(memory_format=torch.channels_last),
                                     persistent=False)
                bias_key = None
                if len(node.inputs) > 2 and node.inputs[2] in consts:
                    bias_key = f"b{len(self._convs)}"
                    bias = torch.from_numpy(np.array(consts[node.inputs[2]], np.float32)).reshape(-1)
                    self.register_buffer(bias_key, bias.to(dtype), persistent=False)
                self._convs[node.name] = (key, bias_key)
        bf16_convs = {name for name, (key, _) in self._convs.items() if getattr(self, key).dtype == torch.bfloat16}
        self._stored_bf16 = frozenset(precision.read_by_bf16_convs_only(graph, bf16_convs)
                                      if "bf16_upsample" in self.rewrites else ())
        # pad node -> the upsampling it alone reads, run together by padded_upsample
        self._padded = padded_upsample.pairs(graph) if "padded_upsample" in self.rewrites else {}
        self._deferred = frozenset(self._padded.values())

    def weight_keys(self, convs: Iterable[str]) -> set[str]:
        """The buffer names holding these convolutions' weights (what an exported graph's conv calls read)."""
        return {self._convs[name][0] for name in convs}

    def _value(self, name: str, env: dict[str, Val]) -> Val:
        if name in env:
            return env[name]
        if name in self._ints:
            return self._ints[name]
        return Val(getattr(self, self._keys[name]), False)

    def _conv(self, node: Node, x: Tensor) -> Val:
        key, bias_key = self._convs[node.name]
        weight = getattr(self, key)
        if node.name in self._columns:
            return Val(self._conv_by_columns(node, x, weight, bias_key), True)
        kh, kw = weight.shape[-2:]
        strides = [int(s) for s in node.attrs.get("strides", [1, 1, 1, 1])]
        dilations = [int(d) for d in node.attrs.get("dilations", [1, 1, 1, 1])]
        sh, sw, dh, dw = strides[1], strides[2], dilations[1], dilations[2]
        top, bottom, left, right = graph_exec.conv_pads(node, x, kh, kw, sh, sw, dh, dw)
        if top == bottom and left == right:
            padding: tuple[int, int] = (top, left)
        else:
            x = F.pad(x, (left, right, top, bottom))
            padding = (0, 0)
        groups = x.shape[1] // weight.shape[1]
        bias = getattr(self, bias_key) if bias_key else None
        y = F.conv2d(x.to(weight.dtype), weight, bias, (sh, sw), padding, (dh, dw), groups)
        return Val(y.float(), True)

    def _conv_by_columns(self, node: Node, x: Tensor, weight: Tensor, bias_key: str | None) -> Tensor:
        kh, kw = weight.shape[-2], self._columns[node.name]
        top, bottom, left, right = graph_exec.conv_pads(node, x, kh, kw, 1, 1, 1, 1)
        if top or bottom or left or right:
            x = F.pad(x, (left, right, top, bottom))
        return column_convs.conv_by_columns(x, weight, kw, getattr(self, bias_key) if bias_key else None)

    def _padded_upsample(self, pad: Node, env: dict[str, Val], ctx: graph_exec.Context) -> Val:
        resize = self.graph.node(self._padded[pad.name])
        args = [self._value(i, env) for i in resize.inputs]
        x = args[0].nchw()
        out_h, out_w = args[1].ints()
        if (out_h, out_w) == (2 * x.shape[-2], 2 * x.shape[-1]) and x.shape[-2] > 1 and x.shape[-1] > 1:
            dtype = torch.bfloat16 if resize.name in self._stored_bf16 else None
            return Val(padded_upsample.padded_double(x, dtype), True)
        up = graph_exec.OPS[resize.op](ctx, resize, args)  # another ratio: as the graph has it
        return graph_exec.OPS[pad.op](ctx, pad, [up] + [self._value(i, env) for i in pad.inputs[1:]])

    def forward(self, x: Tensor) -> Tensor:
        graph = self.graph
        env: dict[str, Val] = {graph.inputs[0]: Val(x, True)}
        ctx = graph_exec.Context(graph=graph, shapes=self.shapes, record=None, memo={}, at_reference=True,
                                 rewrites=self.rewrites, stored_bf16=self._stored_bf16)
        for node in graph.nodes:
            if node.op in ("Placeholder", "Const"):
                continue
            if node.name in self._deferred:  # computed with its pad, below
                continue
            if node.name in self._padded:
                env[node.name] = self._padded_upsample(node, env, ctx)
                continue
            args = [self._value(i, env) for i in node.inputs]
            if node.name in self._convs:
                env[node.name] = self._conv(node, args[0].nchw())
                continue
            out = shape_op(node, args, self._scalars)
            env[node.name] = out if out is not None else graph_exec.OPS[node.op](ctx, node, args)
        return self._value(graph.outputs[0], env).nchw()


class CastConv(nn.Module):
    """An ``nn.Conv2d`` run in another dtype (bfloat16), taking and giving float32, as :class:`ExportableGraph`
    runs a graph's convolutions."""

    def __init__(self, conv: nn.Conv2d, dtype: torch.dtype) -> None:
        super().__init__()
        if conv.padding_mode != "zeros":
            raise ValueError(f"padding mode {conv.padding_mode!r} has no cast recipe")
        self.dtype = dtype
        self.stride, self.padding, self.dilation, self.groups = conv.stride, conv.padding, conv.dilation, conv.groups
        self.register_buffer("weight", conv.weight.detach().to(dtype).contiguous(memory_format=torch.channels_last))
        self.register_buffer("bias", None if conv.bias is None else conv.bias.detach().to(dtype))

    def forward(self, x: Tensor) -> Tensor:
        y = F.conv2d(x.to(self.dtype), self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        return y.float()


def _cast_convs(module: nn.Module, dtype: torch.dtype) -> None:
    for name, child in module.named_children():
        if isinstance(child, nn.Conv2d):
            if precision.conv_dtype(child.weight, dtype) == dtype:
                setattr(module, name, CastConv(child, dtype))
        else:
            _cast_convs(child, dtype)


def for_network(network: nn.Module, conv_dtype: torch.dtype = torch.float32, compiled: bool = False,
                rewrites: Iterable[str] | None = None) -> tuple[nn.Module, int]:
    """The export-ready form of a style's eager network and the multiple its H and W must have.

    ``compiled``: the form Inductor compiles (:func:`build_package`), with every one of :data:`REWRITES` (or
    ``rewrites`` only, if given); the ONNX export keeps the graph's own form, which the device models' rewrites
    match.

    An imported graph becomes an :class:`ExportableGraph`; a named torch network (AnimeGAN v1) is copied with
    channels-last weights and its convolutions in ``conv_dtype`` (:class:`CastConv`).
    """
    if isinstance(network, GraphModule):
        if rewrites is None:
            rewrites = REWRITES if compiled else ()
        module = ExportableGraph(network, conv_dtype, rewrites)
        return module.eval(), module.size_multiple
    multiple = getattr(network, "size_multiple", None)
    if multiple is None:
        raise ValueError(f"no export recipe for {type(network).__name__}")
    module = copy.deepcopy(network).to(memory_format=torch.channels_last).eval()
    if conv_dtype != torch.float32:
        _cast_convs(module, conv_dtype)
    return module, int(multiple)


def export(module: nn.Module, multiple: int, max_side: int = 8192, fixed_shape: tuple[int, int] | None = None
           ) -> tuple[torch.export.ExportedProgram, tuple[int, int] | None]:
    """Export with H and W symbolic multiples of ``multiple`` (512 px is the size Inductor tunes for).

    Returns the program and the one (H, W) it runs at, or None when it runs at every multiple. A graph that
    computes a size in floating point (a resize by a float scale, as some ONNX exports do) gets that size pinned
    to the example's by ``torch.export``; such a graph is exported at ``fixed_shape`` (H, W) only, the size its
    crops are painted at (the face models' ``paint_shape``; :data:`FIXED_SIDE` square if None), and its backends
    run other sizes on the eager network."""
    example = export_example()
    with torch.no_grad():
        program = torch.export.export(module, (example,), dynamic_shapes=dynamic_sizes(multiple, max_side))
        try:
            program.module()(torch.zeros(1, 3, MIN_MULTIPLES * multiple, (MIN_MULTIPLES + 1) * multiple))
        except AssertionError:
            h, w = fixed_shape or (FIXED_SIDE, FIXED_SIDE)
            return torch.export.export(module, (export_example(h, w),)), (h, w)
    return program, None


def export_example(h: int = FIXED_SIDE, w: int = FIXED_SIDE) -> Tensor:
    """The picture every export traces with (512 px is the size Inductor tunes loops for)."""
    return torch.zeros(1, 3, h, w).contiguous(memory_format=torch.channels_last)


def dynamic_sizes(multiple: int, max_side: int = 8192) -> dict:
    """``torch.export``'s dynamic shapes for a network's one input: H and W any multiple of ``multiple``."""
    from torch.export import Dim

    # at least three multiples: at two, the deepest level is 2 px wide and torch.export pins that case
    kh, kw = (Dim(name, min=MIN_MULTIPLES, max=max_side // multiple) for name in ("kh", "kw"))
    return {"x": {2: multiple * kh, 3: multiple * kw}}


def fixed_size_metadata(fixed: tuple[int, int] | None) -> dict[str, str]:
    """What a package records about the one size it runs at (read back by :func:`fixed_size_of`)."""
    return {FIXED_SIZE_KEY: f"{fixed[0]}x{fixed[1]}"} if fixed else {}


def fixed_size_of(metadata: dict[str, str]) -> tuple[int, int] | None:
    value = metadata.get(FIXED_SIZE_KEY)
    if not value:
        return None
    h, w = value.split("x")
    return int(h), int(w)


def faithful_conv_dtype(network: nn.Module, pictures: list[Tensor], fast: torch.dtype) -> torch.dtype:
    """``fast`` where the network's convolutions in ``fast`` stay faithful (:func:`anipaint.quality.faithful`) to
    its eager float32 network on every picture (NCHW in [-1, 1]), else float32.

    Checked on the export-ready module, eagerly: what a package compiled from it computes. A line drawing
    (v3-sketch) fails it: its near-binary edges move by a pixel under bf16 rounding."""
    if fast == torch.float32:
        return fast
    module, multiple = for_network(network, fast, compiled=True)
    for x in pictures:
        h, w = (max(MIN_MULTIPLES * multiple, n // multiple * multiple) for n in x.shape[-2:])
        x = torch.nn.functional.interpolate(x, size=(h, w), mode="bilinear", align_corners=False)
        with torch.inference_mode():
            want, got = from_tensor(network(x)), from_tensor(module(x))
        if not faithful(psnr(got, want), far_share(got, want)):
            return torch.float32
    return fast


def build_package(network: nn.Module, out: Path, conv_dtype: torch.dtype = torch.float32,
                  rewrites: Iterable[str] = REWRITES, fixed_shape: tuple[int, int] | None = None) -> int:
    """AOTInductor-compile a style's network into a ``.pt2`` package at ``out``; returns its size multiple.
    ``rewrites``: the compiled form's rewrites to apply (all of them but for the bench's steps); ``fixed_shape``:
    :func:`export`'s."""
    module, multiple = for_network(network, conv_dtype, rewrites=rewrites)
    program, fixed = export(module, multiple, fixed_shape=fixed_shape)
    configs = {"aot_inductor.metadata": fixed_size_metadata(fixed)} if fixed else None
    compile_package(program, out, configs)
    return multiple


def build_onnx(network: nn.Module, out: Path, fixed_shape: tuple[int, int] | None = None) -> int:
    """Export a style's network (float32) to ONNX with symbolic H and W (or the one size :func:`export` found)
    at ``out``; returns its size multiple.

    Through ``torch.export`` (the dynamo exporter): the TorchScript tracer would freeze the shape arithmetic
    at the example's size."""
    module, multiple = for_network(network)
    program, _ = export(module, multiple, fixed_shape=fixed_shape)  # a fixed size shows in the file's input
    torch.onnx.export(program, dynamo=True, optimize=True).save(str(out))
    return multiple
