"""Shape arithmetic on Python numbers, so that ``torch.export`` sees symbolic sizes instead of tensor data.

An imported graph computes its resize and reshape sizes from ``Shape`` with small tensor ops (Shape → StridedSlice
→ Pack → Reshape / ResizeBilinear). :func:`shape_op` runs those ops on :class:`ShapeValues` (plain or symbolic
numbers) instead, for :class:`~.graph_program.ExportableGraph`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from anipaint.networks.graph_exec import Val
from anipaint.networks.ir import Node


class ShapeValues(Val):
    """A shape value: Python numbers (integers, symbolic sizes while exporting, and the floats some shape
    arithmetic makes) laid out as a tensor of ``dims``."""

    __slots__ = ("vals", "dims")

    def __init__(self, vals: list, dims: tuple[int, ...]) -> None:
        self.vals, self.dims, self.is_nchw = list(vals), tuple(dims), False

    @property
    def t(self) -> Tensor:  # type: ignore[override] - materialised only where a tensor op wants the data
        dtype = torch.float32 if any(isinstance(v, (float, torch.SymFloat)) for v in self.vals) else torch.int64
        return torch.tensor(self.vals, dtype=dtype).reshape(self.dims)

    def ints(self) -> list[int]:
        return list(self.vals)

    def nhwc(self) -> Tensor:
        return self.t


def _shape_binary(fn: Callable[[int, int], int]) -> Callable[[ShapeValues, ShapeValues], ShapeValues]:
    def run(a: ShapeValues, b: ShapeValues) -> ShapeValues:
        if len(a.vals) == 1 and len(b.vals) != 1:
            return ShapeValues([fn(a.vals[0], v) for v in b.vals], b.dims)
        if len(b.vals) == 1:
            return ShapeValues([fn(v, b.vals[0]) for v in a.vals], a.dims if len(a.dims) >= len(b.dims) else b.dims)
        return ShapeValues([fn(x, y) for x, y in zip(a.vals, b.vals, strict=True)], a.dims)

    return run


_INT_BINARY = {
    "Add": _shape_binary(lambda a, b: a + b), "AddV2": _shape_binary(lambda a, b: a + b),
    "RealDiv": _shape_binary(lambda a, b: a / b),
    "Sub": _shape_binary(lambda a, b: a - b), "Mul": _shape_binary(lambda a, b: a * b),
    "FloorDiv": _shape_binary(lambda a, b: a // b), "Maximum": _shape_binary(max), "Minimum": _shape_binary(min),
}


def _cast(v, to_int: bool):
    if to_int:
        return torch.sym_int(v) if isinstance(v, torch.SymFloat) else int(v)
    return torch.sym_float(v) if isinstance(v, torch.SymInt) else float(v)


def shape_op(node: Node, args: list[Val], scalars: dict[str, ShapeValues]) -> ShapeValues | None:
    """The shape-arithmetic ops on Python numbers; None when the node is a tensor op.

    ``scalars`` are the graph's small float constants as numbers: a size scaled by 2.0 and floored (ONNX
    exports compute resize sizes so) stays a symbolic size."""
    op = node.op
    if op == "Shape":
        shape = list(args[0].nhwc().shape)
        return ShapeValues(shape, (len(shape),))
    if any(isinstance(a, ShapeValues) for a in args):
        args = [scalars.get(name, a) for a, name in zip(args, node.inputs, strict=True)]
    if not args or not all(isinstance(a, ShapeValues) for a in args):
        return None
    if op in _INT_BINARY:
        return _INT_BINARY[op](args[0], args[1])
    if op in ("Identity", "StopGradient"):
        return args[0]
    if op == "Cast":
        to_int = str(node.attrs.get("DstT", "DT_FLOAT")) in ("DT_INT32", "DT_INT64")
        return ShapeValues([_cast(v, to_int) for v in args[0].vals], args[0].dims)
    if op == "Floor":
        return ShapeValues([math.floor(v) for v in args[0].vals], args[0].dims)
    if op == "GatherV2" and args[2].vals == [0] and len(args[0].dims) == 1:
        return ShapeValues([args[0].vals[i] for i in args[1].vals], args[1].dims)
    if op == "StridedSlice" and len(args[0].dims) == 1 and len(args[1].vals) == 1:
        return _slice_1d(node, args[0], args[1].vals[0], args[2].vals[0], args[3].vals[0])
    if op == "Pack" and int(node.attrs.get("axis", 0)) == 0 and all(a.dims in ((), (1,)) for a in args):
        return ShapeValues([a.vals[0] for a in args], (len(args),))
    if op in ("ConcatV2", "Concat"):
        return ShapeValues([v for a in args[:-1] for v in a.vals], (sum(len(a.vals) for a in args[:-1]),))
    if op == "Range":
        start, limit, delta = (a.vals[0] for a in args)
        vals = list(range(start, limit, delta))
        return ShapeValues(vals, (len(vals),))
    if op == "ExpandDims" and args[1].vals == [0]:
        return ShapeValues(args[0].vals, (1, *args[0].dims))
    if op == "Squeeze":
        dims = args[0].dims
        drop = {int(d) % len(dims) for d in node.attrs.get("squeeze_dims", [])} or set(range(len(dims)))
        return ShapeValues(args[0].vals, tuple(n for i, n in enumerate(dims) if i not in drop or n != 1))
    return None


def _slice_1d(node: Node, v: ShapeValues, begin: int, end: int, stride: int) -> ShapeValues | None:
    """TF ``StridedSlice`` of a shape vector (positions are concrete even when the sizes are symbolic)."""
    n = len(v.vals)
    if int(node.attrs.get("shrink_axis_mask", 0)) & 1:
        return ShapeValues([v.vals[begin + n if begin < 0 else begin]], ())
    if stride <= 0 or int(node.attrs.get("ellipsis_mask", 0)) or int(node.attrs.get("new_axis_mask", 0)):
        return None
    lo = 0 if int(node.attrs.get("begin_mask", 0)) & 1 else min(max(begin + n if begin < 0 else begin, 0), n)
    hi = n if int(node.attrs.get("end_mask", 0)) & 1 else min(max(end + n if end < 0 else end, 0), n)
    picked = v.vals[lo:hi:stride]
    return ShapeValues(picked, (len(picked),))
