"""ONNX models (tf2onnx exports) -> the graph IR, run by :class:`~anipaint.networks.graph_module.GraphModule`.

tf2onnx writes TensorFlow's NHWC graphs in ONNX's NCHW vocabulary: a Transpose before the first Conv, NCHW
convolutions and norms, Transposes back where the TF graph needed NHWC. The IR speaks TensorFlow (NHWC), so the
reader records for every ONNX tensor which IR value holds it and in which axis order (``onnx = ir.permute(perm)``):
a Transpose only changes the recorded order, a Conv takes its input as the NCHW view of an NHWC value and gives
the same, element-wise constants are re-laid into the IR order, reductions and pads map their axes. An IR
Transpose is emitted only where an op needs the ONNX order itself (Reshape, Squeeze, Slice, a Softmax over a
moved axis, ...); in the AnimeGANv3 exports that is on small tensors only (norm statistics, attention maps).

Float16 models are widened: float16 constants become float32 and Casts between float types disappear, so the
network runs in float32 whatever the file stores. int64 constants become int32 (Slice's "to the end" sentinel
is clipped). The nodes are sorted topologically first (float16 converters append their Casts at the end).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from anipaint.networks.ir import Graph, Node

_FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}
_INTS = {onnx.TensorProto.INT32, onnx.TensorProto.INT64, onnx.TensorProto.INT8, onnx.TensorProto.UINT8}
_CAST_TO = {**{t: "DT_FLOAT" for t in _FLOATS}, **{t: "DT_INT64" for t in _INTS}, onnx.TensorProto.BOOL: "DT_BOOL"}
_NCHW = (0, 3, 1, 2)  # the ONNX tensor is the NCHW view of an NHWC IR value
_INT32_MAX = np.iinfo(np.int32).max


class OnnxImportError(ValueError):
    """The file is not an ONNX model this reader can translate."""


@dataclass(frozen=True)
class _Value:
    name: str  # IR value name (a node or a constant)
    perm: tuple[int, ...] | None  # onnx tensor = IR value permuted by perm; None: same order (rank unknown)


def _inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(perm))


def _is_identity(perm: tuple[int, ...] | None) -> bool:
    return perm is None or perm == tuple(range(len(perm)))


class _Reader:
    def __init__(self, model: onnx.ModelProto, source: str) -> None:
        self.source = source
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        try:
            inferred = onnx.shape_inference.infer_shapes(model).graph
        except Exception:  # noqa: BLE001 - shape inference is a help for ranks and dtypes, not a requirement
            inferred = model.graph
        self.types: dict[str, int] = {}
        self.ranks: dict[str, int] = {}
        for info in [*inferred.value_info, *inferred.input, *inferred.output]:
            tt = info.type.tensor_type
            self.types[info.name] = tt.elem_type
            if tt.HasField("shape"):
                self.ranks[info.name] = len(tt.shape.dim)
        self.graph = model.graph
        self.nodes: list[Node] = []
        self.consts: dict[str, np.ndarray] = {}
        self.values: dict[str, _Value] = {}  # ONNX tensor name -> where it lives in the IR
        self.used: set[str] = set()
        for init in self.graph.initializer:
            self.add_const(init.name, numpy_helper.to_array(init), onnx_type=init.data_type)

    # --- values -------------------------------------------------------------------------------------------
    def unique(self, name: str) -> str:
        base = name[:-2] if name.endswith(":0") else name
        name, k = base, 1
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name

    def add_const(self, onnx_name: str, arr: np.ndarray, onnx_type: int | None = None) -> None:
        if arr.dtype.kind == "f":
            arr = arr.astype(np.float32)
        elif arr.dtype.kind in "iu":
            arr = np.clip(arr, -_INT32_MAX - 1, _INT32_MAX).astype(np.int32)
        name = self.const(onnx_name, arr)
        self.values[onnx_name] = _Value(name, None)
        if onnx_type is not None:
            self.types[onnx_name] = onnx_type
        self.ranks[onnx_name] = arr.ndim

    def const(self, name: str, arr: np.ndarray) -> str:
        name = self.unique(name)
        self.consts[name] = arr
        return name

    def const_value(self, onnx_name: str) -> np.ndarray | None:
        v = self.values.get(onnx_name)
        return None if v is None else self.consts.get(v.name)

    def rank(self, onnx_name: str) -> int | None:
        v = self.values.get(onnx_name)
        if v is not None and v.perm is not None:
            return len(v.perm)
        return self.ranks.get(onnx_name)

    def emit(self, name: str, op: str, inputs: list[str], attrs: dict[str, Any] | None = None) -> str:
        node = Node(self.unique(name), op, inputs, attrs or {})
        self.nodes.append(node)
        return node.name

    def as_perm(self, onnx_name: str, target: tuple[int, ...] | None) -> str:
        """An IR value whose ``permute(target)`` is the ONNX tensor (an IR Transpose only when needed)."""
        v = self.values[onnx_name]
        if v.perm == target or (_is_identity(v.perm) and _is_identity(target)):
            return v.name
        rank = len(target) if target is not None else len(v.perm)  # type: ignore[arg-type]
        have = v.perm if v.perm is not None else tuple(range(rank))
        inv_t = _inverse(target) if target is not None else tuple(range(rank))
        perm = [have[inv_t[i]] for i in range(rank)]
        if perm == list(range(rank)):
            return v.name
        key = f"{v.name}/transpose_{''.join(map(str, perm))}"
        if key in self.used:  # one materialisation per value and order
            return key
        p = self.const(f"{key}/perm", np.array(perm, np.int32))
        return self.emit(key, "Transpose", [v.name, p])

    def plain(self, onnx_name: str) -> str:
        """The IR value holding the ONNX tensor in ONNX's own axis order."""
        return self.as_perm(onnx_name, None)

    def ints(self, onnx_name: str, what: str) -> list[int]:
        arr = self.const_value(onnx_name)
        if arr is None:
            raise OnnxImportError(f"{self.source}: {what} must be a constant")
        return [int(v) for v in arr.reshape(-1)]

    def set(self, onnx_name: str, ir_name: str, perm: tuple[int, ...] | None = None) -> None:
        self.values[onnx_name] = _Value(ir_name, None if _is_identity(perm) else perm)

    # --- the walk -----------------------------------------------------------------------------------------
    def translate(self) -> Graph:
        graph = self.graph
        initializers = {t.name for t in graph.initializer}
        inputs = [i for i in graph.input if i.name not in initializers]
        if len(inputs) != 1:
            raise OnnxImportError(f"{self.source}: expected one input, found {[i.name for i in inputs]}")
        inp = inputs[0]
        dims = [d.dim_value or -1 for d in inp.type.tensor_type.shape.dim]
        if len(dims) != 4 or dims[-1] != 3:
            raise OnnxImportError(f"{self.source}: expected an NHWC RGB input, got {inp.name} {dims}")
        name = self.emit(inp.name, "Placeholder", [], {"dtype": "float32", "shape": [-1, -1, -1, 3]})
        self.set(inp.name, name)
        for node in graph.node:  # sorted by read_onnx
            handler = OPS.get(node.op_type)
            if handler is None or node.domain not in ("", "ai.onnx"):
                raise OnnxImportError(f"{self.source}: ONNX op {node.op_type} ({node.name!r}) is not supported")
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            handler(self, node, {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()})
        outputs = [self.plain(o.name) for o in graph.output]
        return _prune(Graph(self.nodes, self.consts, [name], outputs, {}))


def _topological(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Nodes in an order where every input is produced first (Kahn's algorithm, file order as tie-break)."""
    produced_by = {o: k for k, n in enumerate(graph.node) for o in n.output}
    waiting = {k: {i for i in n.input if i and i in produced_by} for k, n in enumerate(graph.node)}
    users: dict[int, list[int]] = {}
    for k, deps in waiting.items():
        for d in deps:
            users.setdefault(produced_by[d], []).append(k)
    pending = {k: len({produced_by[d] for d in deps}) for k, deps in waiting.items()}
    queue = [k for k, c in pending.items() if c == 0]
    order: list[int] = []
    while queue:
        queue.sort(reverse=True)
        k = queue.pop()
        order.append(k)
        for u in set(users.get(k, [])):
            pending[u] -= 1
            if pending[u] == 0:
                queue.append(u)
    if len(order) != len(graph.node):
        raise OnnxImportError("ONNX graph has a cycle or an input no node produces")
    return [onnx.NodeProto.FromString(graph.node[k].SerializeToString()) for k in order]


def _prune(graph: Graph) -> Graph:
    """Drop nodes the outputs do not depend on and constants nobody reads."""
    needed = set(graph.outputs)
    keep: list[Node] = []
    for node in reversed(graph.nodes):
        if node.name in needed or node.op == "Placeholder":
            keep.append(node)
            needed.update(node.inputs)
    keep.reverse()
    consts = {k: v for k, v in graph.consts.items() if k in needed}
    return Graph(keep, consts, graph.inputs, graph.outputs, graph.meta)


# --- the op table: ONNX op -> handler(reader, node, attrs) ----------------------------------------------------
Handler = Callable[[_Reader, onnx.NodeProto, dict[str, Any]], None]
OPS: dict[str, Handler] = {}


def _op(*names: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for name in names:
            OPS[name] = fn
        return fn

    return register


def _unary(ir_op: str) -> Handler:
    def run(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
        v = r.values[node.input[0]]
        r.set(node.output[0], r.emit(node.output[0], ir_op, [v.name]), v.perm)

    return run


for _onnx_op, _ir_op in {"Sqrt": "Sqrt", "Reciprocal": "Reciprocal", "Tanh": "Tanh", "Relu": "Relu",
                         "Sigmoid": "Sigmoid", "Exp": "Exp", "Neg": "Neg", "Abs": "Abs", "Floor": "Floor"}.items():
    OPS[_onnx_op] = _unary(_ir_op)


@_op("Identity", "Dropout")
def _identity(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    r.values[node.output[0]] = r.values[node.input[0]]


@_op("Constant")
def _constant(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    tensor = next(a.t for a in node.attribute if a.name == "value")
    r.add_const(node.output[0], numpy_helper.to_array(tensor), onnx_type=tensor.data_type)


@_op("Cast")
def _cast(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    src, dst = r.types.get(node.input[0]), int(attrs["to"])
    v = r.values[node.input[0]]
    if dst not in _CAST_TO:
        raise OnnxImportError(f"{r.source}: Cast to ONNX type {dst} ({node.name!r})")
    same_kind = (src in _FLOATS and dst in _FLOATS) or (src in _INTS and dst in _INTS)
    if same_kind:  # float16 <-> float32 (widened) and int32 <-> int64 (one integer type in the executor)
        r.values[node.output[0]] = v
    else:
        r.set(node.output[0], r.emit(node.output[0], "Cast", [v.name], {"DstT": _CAST_TO[dst]}), v.perm)
    r.types[node.output[0]] = dst


@_op("LeakyRelu")
def _leaky_relu(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    v = r.values[node.input[0]]
    name = r.emit(node.output[0], "LeakyRelu", [v.name], {"alpha": float(attrs.get("alpha", 0.01))})
    r.set(node.output[0], name, v.perm)


_BINARY = {"Add": "AddV2", "Sub": "Sub", "Mul": "Mul", "Div": "RealDiv", "Pow": "Pow", "Max": "Maximum",
           "Min": "Minimum"}


@_op(*_BINARY)
def _binary(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    if len(node.input) != 2:
        raise OnnxImportError(f"{r.source}: {node.op_type} with {len(node.input)} inputs ({node.name!r})")
    a, b = node.input
    ir_op = _BINARY[node.op_type]
    if ir_op == "RealDiv" and r.types.get(a) in _INTS and r.types.get(b) in _INTS:
        ir_op = "FloorDiv"  # integer Div truncates (shape arithmetic: non-negative, so floor is the same)
    ca, cb = r.const_value(a), r.const_value(b)
    if (ca is None) != (cb is None):  # a constant next to a value: re-lay the constant into the value's order
        value, const, const_first = (b, ca, True) if ca is not None else (a, cb, False)
        v = r.values[value]
        name = r.values[a if const_first else b].name
        if v.perm is not None and const.size > 1:
            const = np.transpose(const.reshape((1,) * (len(v.perm) - const.ndim) + const.shape), _inverse(v.perm))
            name = r.const(f"{node.output[0]}/const", np.ascontiguousarray(const))
        elif const.size == 1 and const.ndim > 0:
            name = r.const(f"{node.output[0]}/const", const.reshape(()))
        ins = [name, v.name] if const_first else [v.name, name]
        r.set(node.output[0], r.emit(node.output[0], ir_op, ins), v.perm)
        return
    va, vb = r.values[a], r.values[b]
    if va.perm is not None and r.rank(b) == len(va.perm):
        ins, perm = [va.name, r.as_perm(b, va.perm)], va.perm
    elif vb.perm is not None and r.rank(a) == len(vb.perm):
        ins, perm = [r.as_perm(a, vb.perm), vb.name], vb.perm
    else:
        ins, perm = [r.plain(a), r.plain(b)], None
    r.set(node.output[0], r.emit(node.output[0], ir_op, ins), perm)


@_op("Transpose")
def _transpose(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    v = r.values[node.input[0]]
    rank = r.rank(node.input[0])
    perm = [int(p) for p in attrs.get("perm", [])] or list(reversed(range(rank or 0)))
    have = v.perm if v.perm is not None else tuple(range(len(perm)))
    r.set(node.output[0], v.name, tuple(have[p] for p in perm))


@_op("Conv")
def _conv(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    w = r.const_value(node.input[1])
    if w is None or w.ndim != 4:
        raise OnnxImportError(f"{r.source}: Conv {node.name!r} needs a constant 2-D filter")
    x = r.as_perm(node.input[0], _NCHW)
    out_c, in_per_group, kh, kw = w.shape
    group = int(attrs.get("group", 1))
    if group > 1 and in_per_group == 1:  # depthwise: [C*M, 1, kh, kw] -> [kh, kw, C, M]
        op, laid = "DepthwiseConv2dNative", w.reshape(group, out_c // group, kh, kw).transpose(2, 3, 0, 1)
    elif group == 1:
        op, laid = "Conv2D", w.transpose(2, 3, 1, 0)  # OIHW -> HWIO
    else:
        raise OnnxImportError(f"{r.source}: grouped Conv {node.name!r} (group {group}) is not supported")
    sh, sw = [int(s) for s in attrs.get("strides", [1, 1])]
    dh, dw = [int(d) for d in attrs.get("dilations", [1, 1])]
    conv_attrs: dict[str, Any] = {"strides": [1, sh, sw, 1], "dilations": [1, dh, dw, 1], "data_format": "NHWC"}
    auto_pad = attrs.get("auto_pad", "NOTSET")
    pads = [int(p) for p in attrs.get("pads", [0, 0, 0, 0])]
    if auto_pad == "SAME_UPPER":
        conv_attrs["padding"] = "SAME"
    elif auto_pad in ("NOTSET", "VALID") and not any(pads):
        conv_attrs["padding"] = "VALID"
    elif auto_pad == "NOTSET":  # ONNX [top, left, bottom, right] -> TF explicit [N, H, W, C] pairs
        conv_attrs["padding"] = "EXPLICIT"
        conv_attrs["explicit_paddings"] = [0, 0, pads[0], pads[2], pads[1], pads[3], 0, 0]
    else:
        raise OnnxImportError(f"{r.source}: Conv {node.name!r} auto_pad {auto_pad}")
    filt = r.const(f"{node.output[0]}/filter", np.ascontiguousarray(laid))
    out = r.emit(node.output[0] if len(node.input) < 3 else f"{node.output[0]}/conv", op, [x, filt], conv_attrs)
    if len(node.input) > 2 and node.input[2]:
        bias = r.values[node.input[2]].name
        out = r.emit(node.output[0], "BiasAdd", [out, bias], {"data_format": "NHWC"})
    r.set(node.output[0], out, _NCHW)


def _reduce_to(r: _Reader, node: onnx.NodeProto, ir_op: str, axes: list[int], keep: bool) -> None:
    v = r.values[node.input[0]]
    rank = r.rank(node.input[0])
    if rank is None:
        raise OnnxImportError(f"{r.source}: {node.op_type} {node.name!r} on a value of unknown rank")
    axes = sorted(a % rank for a in axes) if axes else list(range(rank))
    perm = v.perm if v.perm is not None else tuple(range(rank))
    ir_axes = [perm[a] for a in axes]
    ax = r.const(f"{node.output[0]}/axes", np.array(ir_axes, np.int32))
    out = r.emit(node.output[0], ir_op, [v.name, ax], {"keep_dims": keep})
    if keep:
        r.set(node.output[0], out, perm)
    else:  # the remaining axes keep their relative IR order
        left = [perm[a] for a in range(rank) if a not in axes]
        r.set(node.output[0], out, tuple(sorted(left).index(p) for p in left))


@_op("ReduceMean", "ReduceSum")
def _reduce(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    axes = [int(a) for a in attrs.get("axes", [])]
    if len(node.input) > 1 and node.input[1]:  # ReduceSum from opset 13: axes as an input
        axes = r.ints(node.input[1], "reduction axes")
    _reduce_to(r, node, "Mean" if node.op_type == "ReduceMean" else "Sum", axes, bool(attrs.get("keepdims", 1)))


@_op("GlobalAveragePool")
def _global_average_pool(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    rank = r.rank(node.input[0]) or 4
    _reduce_to(r, node, "Mean", list(range(2, rank)), True)


@_op("Pad")
def _pad(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    pads = [int(p) for p in attrs["pads"]] if "pads" in attrs else r.ints(node.input[1], "Pad amounts")
    mode = attrs.get("mode", "constant")
    v = r.values[node.input[0]]
    rank = len(pads) // 2
    perm = v.perm if v.perm is not None else tuple(range(rank))
    ir_pads = np.zeros((rank, 2), np.int32)
    for a in range(rank):
        ir_pads[perm[a]] = (pads[a], pads[a + rank])
    p = r.const(f"{node.output[0]}/paddings", ir_pads)
    if mode == "reflect":
        out = r.emit(node.output[0], "MirrorPad", [v.name, p], {"mode": "REFLECT"})
    elif mode == "constant":
        value = float(attrs.get("value", 0.0))
        if len(node.input) > 2 and node.input[2]:
            value = float(r.const_value(node.input[2]).reshape(-1)[0])  # type: ignore[union-attr]
        ins = [v.name, p] + ([r.const(f"{node.output[0]}/value", np.array(value, np.float32))] if value else [])
        out = r.emit(node.output[0], "Pad", ins)
    else:
        raise OnnxImportError(f"{r.source}: Pad mode {mode!r} ({node.name!r}) is not supported")
    r.set(node.output[0], out, v.perm)


_COORDINATES = {"asymmetric": (False, False), "half_pixel": (False, True), "pytorch_half_pixel": (False, True),
                "align_corners": (True, False)}


@_op("Resize", "Upsample")
def _resize(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    mode = attrs.get("mode", "nearest")
    coords = attrs.get("coordinate_transformation_mode", "asymmetric" if node.op_type == "Upsample" else "half_pixel")
    if mode not in ("linear", "bilinear") or coords not in _COORDINATES:
        raise OnnxImportError(f"{r.source}: {node.op_type} mode {mode!r}/{coords!r} ({node.name!r})")
    x = r.as_perm(node.input[0], _NCHW)
    out = node.output[0]
    ins = list(node.input)
    sizes = ins[3] if len(ins) > 3 and ins[3] else None
    scales = ins[2] if len(ins) > 2 and ins[2] else (ins[1] if node.op_type == "Upsample" or r.opset == 10 else None)
    if scales is not None and r.const_value(scales) is not None and r.const_value(scales).size == 0:
        scales = None  # an empty scales tensor: the sizes input says it
    one = r.const(f"{out}/stride", np.array([1], np.int32))
    hw_begin, hw_end = r.const(f"{out}/begin", np.array([2], np.int32)), r.const(f"{out}/end", np.array([4], np.int32))
    if sizes is not None:  # ONNX NCHW sizes -> [h, w]
        hw = r.emit(f"{out}/size", "StridedSlice", [r.plain(sizes), hw_begin, hw_end, one])
    elif scales is not None:  # floor(input size * scale), as ONNX defines the output size
        shape = r.emit(f"{out}/shape", "Shape", [x])
        b1, b3 = r.const(f"{out}/b1", np.array([1], np.int32)), r.const(f"{out}/b3", np.array([3], np.int32))
        in_hw = r.emit(f"{out}/in_hw", "StridedSlice", [shape, b1, b3, one])
        in_hw = r.emit(f"{out}/in_hw_float", "Cast", [in_hw], {"DstT": "DT_FLOAT"})
        factor = r.emit(f"{out}/scale_hw", "StridedSlice", [r.plain(scales), hw_begin, hw_end, one])
        scaled = r.emit(f"{out}/floor", "Floor", [r.emit(f"{out}/scaled", "Mul", [in_hw, factor])])
        hw = r.emit(f"{out}/size", "Cast", [scaled], {"DstT": "DT_INT32"})
    else:
        raise OnnxImportError(f"{r.source}: {node.op_type} {node.name!r} has neither scales nor sizes")
    align, half = _COORDINATES[coords]
    name = r.emit(out, "ResizeBilinear", [x, hw], {"align_corners": align, "half_pixel_centers": half})
    r.set(out, name, _NCHW)


@_op("Shape")
def _shape(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    v = r.values[node.input[0]]
    shape = r.emit(f"{node.output[0]}/ir" if v.perm else node.output[0], "Shape", [v.name], {"out_type": "int32"})
    if v.perm is not None:  # the IR shape in ONNX's axis order
        idx, axis = r.const(f"{node.output[0]}/perm", np.array(v.perm, np.int32)), r.const(
            f"{node.output[0]}/axis", np.array(0, np.int32))
        shape = r.emit(node.output[0], "GatherV2", [shape, idx, axis])
    r.set(node.output[0], shape)
    r.types[node.output[0]] = onnx.TensorProto.INT64


@_op("Gather")
def _gather(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    axis = r.const(f"{node.output[0]}/axis", np.array(int(attrs.get("axis", 0)), np.int32))
    out = r.emit(node.output[0], "GatherV2", [r.plain(node.input[0]), r.plain(node.input[1]), axis])
    r.set(node.output[0], out)


@_op("Slice")
def _slice(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    if "starts" in attrs:  # opset < 10: attributes
        starts, ends = [int(v) for v in attrs["starts"]], [int(v) for v in attrs["ends"]]
        axes = [int(v) for v in attrs.get("axes", range(len(starts)))]
        steps = [1] * len(starts)
    else:
        ins = list(node.input) + [""] * (5 - len(node.input))
        starts, ends = r.ints(ins[1], "Slice starts"), r.ints(ins[2], "Slice ends")
        axes = r.ints(ins[3], "Slice axes") if ins[3] else list(range(len(starts)))
        steps = r.ints(ins[4], "Slice steps") if ins[4] else [1] * len(starts)
    if any(a < 0 for a in axes):
        rank = r.rank(node.input[0])
        if rank is None:
            raise OnnxImportError(f"{r.source}: Slice {node.name!r} with negative axes on unknown rank")
        axes = [a % rank for a in axes]
    n = max(axes) + 1
    begin, end, stride = [0] * n, [0] * n, [1] * n
    mask = sum(1 << d for d in range(n) if d not in axes)  # untouched dims: whole range
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        begin[a], end[a], stride[a] = s, int(np.clip(e, -_INT32_MAX, _INT32_MAX)), st
    out = node.output[0]
    ins_ir = [r.plain(node.input[0])] + [r.const(f"{out}/{k}", np.array(v, np.int32))
                                         for k, v in (("begin", begin), ("end", end), ("strides", stride))]
    r.set(out, r.emit(out, "StridedSlice", ins_ir, {"begin_mask": mask, "end_mask": mask}))


def _axes(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> list[int]:
    if "axes" in attrs:
        return [int(a) for a in attrs["axes"]]
    return r.ints(node.input[1], f"{node.op_type} axes") if len(node.input) > 1 and node.input[1] else []


@_op("Squeeze")
def _squeeze(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    out = r.emit(node.output[0], "Squeeze", [r.plain(node.input[0])], {"squeeze_dims": _axes(r, node, attrs)})
    r.set(node.output[0], out)


@_op("Unsqueeze")
def _unsqueeze(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    value = r.plain(node.input[0])
    axes = _axes(r, node, attrs)
    if any(a < 0 for a in axes):
        rank = (r.rank(node.input[0]) or 0) + len(axes)
        axes = [a % rank for a in axes]
    for k, a in enumerate(sorted(axes)):  # ascending: each axis is a position in the output
        dim = r.const(f"{node.output[0]}/dim{k}", np.array(a, np.int32))
        value = r.emit(node.output[0] if k == len(axes) - 1 else f"{node.output[0]}/{k}", "ExpandDims", [value, dim])
    r.set(node.output[0], value)


@_op("Concat")
def _concat(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    axis = int(attrs["axis"])
    perms = {r.values[i].perm for i in node.input}
    perm = perms.pop() if len(perms) == 1 else None
    if perm is not None:
        ins, ir_axis = [r.values[i].name for i in node.input], perm[axis % len(perm)]
    else:
        ins, ir_axis = [r.plain(i) for i in node.input], axis
    ax = r.const(f"{node.output[0]}/axis", np.array(ir_axis, np.int32))
    r.set(node.output[0], r.emit(node.output[0], "ConcatV2", [*ins, ax], {"N": len(ins)}), perm)


@_op("Reshape")
def _reshape(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    target = r.const_value(node.input[1])
    if target is not None and 0 in target.reshape(-1).tolist():
        raise OnnxImportError(f"{r.source}: Reshape {node.name!r} copies a dimension (0), not supported")
    out = r.emit(node.output[0], "Reshape", [r.plain(node.input[0]), r.plain(node.input[1])])
    r.set(node.output[0], out)


@_op("Softmax")
def _softmax(r: _Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    rank = r.rank(node.input[0])
    if rank is None:
        raise OnnxImportError(f"{r.source}: Softmax {node.name!r} on a value of unknown rank")
    axis = int(attrs.get("axis", -1 if r.opset >= 13 else 1)) % rank
    if axis != rank - 1:  # before opset 13 Softmax flattens from `axis` on: the same only for the last axis
        raise OnnxImportError(f"{r.source}: Softmax {node.name!r} over axis {axis} of {rank}")
    v = r.values[node.input[0]]
    if v.perm is not None and v.perm[axis] == rank - 1:  # the IR's last axis already
        r.set(node.output[0], r.emit(node.output[0], "Softmax", [v.name]), v.perm)
    else:
        r.set(node.output[0], r.emit(node.output[0], "Softmax", [r.plain(node.input[0])]))


# --- entry points ---------------------------------------------------------------------------------------------
def read_onnx(path: Path | str) -> Graph:
    """Read an ONNX model (a tf2onnx export with one NHWC RGB input) into the IR, float32 throughout."""
    path = Path(path)
    try:
        model = onnx.load(str(path))
    except Exception as exc:  # noqa: BLE001 - protobuf raises several types for a file that is not ONNX
        raise OnnxImportError(f"{path} is not an ONNX model: {exc}") from exc
    ordered = _topological(model.graph)
    del model.graph.node[:]
    model.graph.node.extend(ordered)
    onnx.checker.check_model(model)
    graph = _Reader(model, path.name).translate()
    graph.meta.update({
        "source_format": "onnx",
        "source": path.name,
        "producer": f"{model.producer_name} {model.producer_version}".strip(),
        "opset": next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None),
        "layout": "NHWC",
        "notes": "ONNX (NCHW ops over a TF NHWC graph) translated to the NHWC IR; float16 widened to float32.",
    })
    return graph


def convert_graph(sources: list[Path], out_dir: Path) -> dict[str, Any]:
    """An ONNX network run by the graph executor -> ``out_dir/model.pt`` holding ``Graph.to_dict()``."""
    from anipaint.networks.graph_module import GraphModule, save_graph

    graph = read_onnx(sources[0])
    module = GraphModule(graph)  # fails here, not at first use, if the executor lacks an op
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_graph(graph, out_dir / "model.pt")
    return {"parameters": graph.parameter_count(), "nodes": len(graph.nodes), "format": "onnx",
            "opset": graph.meta["opset"], "size_multiple": module.size_multiple, "notes": graph.meta["notes"]}
