"""The ONNX op table: one function per ONNX op, emitting IR nodes (TensorFlow's vocabulary, NHWC values).

Each handler takes the :class:`~.onnx_reader.Reader`, the ONNX node and its attributes. A Transpose only changes
the recorded axis order; Conv, Resize and Upsample take their input as the NCHW view of an NHWC value; element-wise
constants are re-laid into the value's IR order; reductions and pads map their axes; ops that need ONNX's own
order (Reshape, Squeeze, Slice, ...) get it through an IR Transpose, which here only small tensors need.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from anipaint.importers.onnx_reader import FLOATS, INT32_MAX, INTS, NCHW, OnnxImportError, Reader, inverse

_CAST_TO = {**{t: "DT_FLOAT" for t in FLOATS}, **{t: "DT_INT64" for t in INTS}, onnx.TensorProto.BOOL: "DT_BOOL"}

Handler = Callable[[Reader, onnx.NodeProto, dict[str, Any]], None]
OPS: dict[str, Handler] = {}


def _op(*names: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for name in names:
            OPS[name] = fn
        return fn

    return register


def _unary(ir_op: str) -> Handler:
    def run(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
        v = r.values[node.input[0]]
        r.set(node.output[0], r.emit(node.output[0], ir_op, [v.name]), v.perm)

    return run


for _onnx_op, _ir_op in {"Sqrt": "Sqrt", "Reciprocal": "Reciprocal", "Tanh": "Tanh", "Relu": "Relu",
                         "Sigmoid": "Sigmoid", "Exp": "Exp", "Neg": "Neg", "Abs": "Abs", "Floor": "Floor"}.items():
    OPS[_onnx_op] = _unary(_ir_op)


@_op("Identity", "Dropout")
def _identity(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    r.values[node.output[0]] = r.values[node.input[0]]


@_op("Constant")
def _constant(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    tensor = next(a.t for a in node.attribute if a.name == "value")
    r.add_const(node.output[0], numpy_helper.to_array(tensor), onnx_type=tensor.data_type)


@_op("Cast")
def _cast(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    src, dst = r.types.get(node.input[0]), int(attrs["to"])
    v = r.values[node.input[0]]
    if dst not in _CAST_TO:
        raise OnnxImportError(f"{r.source}: Cast to ONNX type {dst} ({node.name!r})")
    same_kind = (src in FLOATS and dst in FLOATS) or (src in INTS and dst in INTS)
    if same_kind:  # float16 <-> float32 (widened) and int32 <-> int64 (one integer type in the executor)
        r.values[node.output[0]] = v
    else:
        r.set(node.output[0], r.emit(node.output[0], "Cast", [v.name], {"DstT": _CAST_TO[dst]}), v.perm)
    r.types[node.output[0]] = dst


@_op("LeakyRelu")
def _leaky_relu(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    v = r.values[node.input[0]]
    name = r.emit(node.output[0], "LeakyRelu", [v.name], {"alpha": float(attrs.get("alpha", 0.01))})
    r.set(node.output[0], name, v.perm)


_BINARY = {"Add": "AddV2", "Sub": "Sub", "Mul": "Mul", "Div": "RealDiv", "Pow": "Pow", "Max": "Maximum",
           "Min": "Minimum"}


@_op(*_BINARY)
def _binary(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    if len(node.input) != 2:
        raise OnnxImportError(f"{r.source}: {node.op_type} with {len(node.input)} inputs ({node.name!r})")
    a, b = node.input
    ir_op = _BINARY[node.op_type]
    if ir_op == "RealDiv" and r.types.get(a) in INTS and r.types.get(b) in INTS:
        ir_op = "FloorDiv"  # integer Div truncates (shape arithmetic: non-negative, so floor is the same)
    ca, cb = r.const_value(a), r.const_value(b)
    if (ca is None) != (cb is None):  # a constant next to a value: re-lay the constant into the value's order
        value, const, const_first = (b, ca, True) if ca is not None else (a, cb, False)
        v = r.values[value]
        name = r.values[a if const_first else b].name
        if v.perm is not None and const.size > 1:
            const = np.transpose(const.reshape((1,) * (len(v.perm) - const.ndim) + const.shape), inverse(v.perm))
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
def _transpose(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    v = r.values[node.input[0]]
    rank = r.rank(node.input[0])
    perm = [int(p) for p in attrs.get("perm", [])] or list(reversed(range(rank or 0)))
    have = v.perm if v.perm is not None else tuple(range(len(perm)))
    r.set(node.output[0], v.name, tuple(have[p] for p in perm))


@_op("Conv")
def _conv(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    w = r.const_value(node.input[1])
    if w is None or w.ndim != 4:
        raise OnnxImportError(f"{r.source}: Conv {node.name!r} needs a constant 2-D filter")
    x = r.as_perm(node.input[0], NCHW)
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
    r.set(node.output[0], out, NCHW)


def _reduce_to(r: Reader, node: onnx.NodeProto, ir_op: str, axes: list[int], keep: bool) -> None:
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
def _reduce(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    axes = [int(a) for a in attrs.get("axes", [])]
    if len(node.input) > 1 and node.input[1]:  # ReduceSum from opset 13: axes as an input
        axes = r.ints(node.input[1], "reduction axes")
    _reduce_to(r, node, "Mean" if node.op_type == "ReduceMean" else "Sum", axes, bool(attrs.get("keepdims", 1)))


@_op("GlobalAveragePool")
def _global_average_pool(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    rank = r.rank(node.input[0]) or 4
    _reduce_to(r, node, "Mean", list(range(2, rank)), True)


@_op("Pad")
def _pad(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
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
def _resize(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    mode = attrs.get("mode", "nearest")
    coords = attrs.get("coordinate_transformation_mode", "asymmetric" if node.op_type == "Upsample" else "half_pixel")
    if mode not in ("linear", "bilinear") or coords not in _COORDINATES:
        raise OnnxImportError(f"{r.source}: {node.op_type} mode {mode!r}/{coords!r} ({node.name!r})")
    x = r.as_perm(node.input[0], NCHW)
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
    r.set(out, name, NCHW)


@_op("Shape")
def _shape(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    v = r.values[node.input[0]]
    shape = r.emit(f"{node.output[0]}/ir" if v.perm else node.output[0], "Shape", [v.name], {"out_type": "int32"})
    if v.perm is not None:  # the IR shape in ONNX's axis order
        idx, axis = r.const(f"{node.output[0]}/perm", np.array(v.perm, np.int32)), r.const(
            f"{node.output[0]}/axis", np.array(0, np.int32))
        shape = r.emit(node.output[0], "GatherV2", [shape, idx, axis])
    r.set(node.output[0], shape)
    r.types[node.output[0]] = onnx.TensorProto.INT64


@_op("Gather")
def _gather(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    axis = r.const(f"{node.output[0]}/axis", np.array(int(attrs.get("axis", 0)), np.int32))
    out = r.emit(node.output[0], "GatherV2", [r.plain(node.input[0]), r.plain(node.input[1]), axis])
    r.set(node.output[0], out)


@_op("Slice")
def _slice(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
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
        begin[a], end[a], stride[a] = s, int(np.clip(e, -INT32_MAX, INT32_MAX)), st
    out = node.output[0]
    ins_ir = [r.plain(node.input[0])] + [r.const(f"{out}/{k}", np.array(v, np.int32))
                                         for k, v in (("begin", begin), ("end", end), ("strides", stride))]
    r.set(out, r.emit(out, "StridedSlice", ins_ir, {"begin_mask": mask, "end_mask": mask}))


def _axes(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> list[int]:
    if "axes" in attrs:
        return [int(a) for a in attrs["axes"]]
    return r.ints(node.input[1], f"{node.op_type} axes") if len(node.input) > 1 and node.input[1] else []


@_op("Squeeze")
def _squeeze(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    out = r.emit(node.output[0], "Squeeze", [r.plain(node.input[0])], {"squeeze_dims": _axes(r, node, attrs)})
    r.set(node.output[0], out)


@_op("Unsqueeze")
def _unsqueeze(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
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
def _concat(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
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
def _reshape(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
    target = r.const_value(node.input[1])
    if target is not None and 0 in target.reshape(-1).tolist():
        raise OnnxImportError(f"{r.source}: Reshape {node.name!r} copies a dimension (0), not supported")
    out = r.emit(node.output[0], "Reshape", [r.plain(node.input[0]), r.plain(node.input[1])])
    r.set(node.output[0], out)


@_op("Softmax")
def _softmax(r: Reader, node: onnx.NodeProto, attrs: dict[str, Any]) -> None:
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

