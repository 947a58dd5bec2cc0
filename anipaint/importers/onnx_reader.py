"""The state of one ONNX model being read into the IR: where each ONNX tensor lives, and in which axis order.

For every ONNX tensor the reader records the IR value holding it and a permutation (``onnx = ir.permute(perm)``),
so tf2onnx's NCHW graph over a TF NHWC network maps onto NHWC IR values without transposing feature maps; the op
handlers (:data:`.onnx_ops.OPS`) ask for a value in the order they need (:meth:`Reader.as_perm`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from anipaint.errors import ModelImportError
from anipaint.networks.ir import Node

FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}
INTS = {onnx.TensorProto.INT32, onnx.TensorProto.INT64, onnx.TensorProto.INT8, onnx.TensorProto.UINT8}
NCHW = (0, 3, 1, 2)  # the ONNX tensor is the NCHW view of an NHWC IR value
INT32_MAX = np.iinfo(np.int32).max


class OnnxImportError(ModelImportError):
    """The file is not an ONNX model this reader can translate."""


@dataclass(frozen=True)
class _Value:
    name: str  # IR value name (a node or a constant)
    perm: tuple[int, ...] | None  # onnx tensor = IR value permuted by perm; None: same order (rank unknown)


def inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(perm))


def _is_identity(perm: tuple[int, ...] | None) -> bool:
    return perm is None or perm == tuple(range(len(perm)))


class Reader:
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
            arr = np.clip(arr, -INT32_MAX - 1, INT32_MAX).astype(np.int32)
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
        inv_t = inverse(target) if target is not None else tuple(range(rank))
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
