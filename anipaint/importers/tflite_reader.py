"""Reading one TFLite flatbuffer subgraph: tensors, dequantized constants, and the IR nodes emitted for them.

The file is read with the ``tflite`` flatbuffer schema package only (no interpreter). Constants are dequantized to
float32: int8/uint8/int16 ``(q - zero_point) * scale`` per tensor or per channel (the weights of full-integer and
of dynamic-range models), int32 biases ``q * scale``, float16 as is (their ``DEQUANTIZE`` nodes fold, see
:mod:`.tflite_ops`). The op handlers (:data:`.tflite_ops.OPS`) call :class:`Reader` to name values and emit nodes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import tflite

from anipaint.errors import ModelImportError
from anipaint.importers.ir_passes import Editor
from anipaint.networks.ir import Graph, Node

_NP_DTYPES = {
    tflite.TensorType.FLOAT32: np.float32,
    tflite.TensorType.FLOAT16: np.float16,
    tflite.TensorType.INT32: np.int32,
    tflite.TensorType.INT64: np.int64,
    tflite.TensorType.INT8: np.int8,
    tflite.TensorType.UINT8: np.uint8,
    tflite.TensorType.INT16: np.int16,
}
_QUANTIZED = (tflite.TensorType.INT8, tflite.TensorType.UINT8, tflite.TensorType.INT16, tflite.TensorType.INT32)
_ACTIVATIONS = {
    tflite.ActivationFunctionType.NONE: None,
    tflite.ActivationFunctionType.RELU: "Relu",
    tflite.ActivationFunctionType.RELU6: "Relu6",
    tflite.ActivationFunctionType.TANH: "Tanh",
}
Step = tuple[str, list[str], dict[str, Any]]  # (IR op, inputs after the chained one, attrs)


class TFLiteImportError(ModelImportError):
    """The file is not a TFLite model this reader can translate."""


class Reader:
    """One TFLite subgraph being translated; one instance per file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        data = path.read_bytes()
        if data[4:8] != b"TFL3":
            raise TFLiteImportError(f"{path} is not a TFLite flatbuffer (no TFL3 identifier)")
        self.model = tflite.Model.GetRootAsModel(data, 0)
        if self.model.SubgraphsLength() != 1:
            raise TFLiteImportError(f"{path}: expected one subgraph, found {self.model.SubgraphsLength()}")
        self.sg = self.model.Subgraphs(0)
        self.graph = Graph(nodes=[], consts={}, inputs=[], outputs=[], meta={})
        self.ed = Editor(self.graph)  # every node is appended in op order
        self.names: dict[int, str] = {}  # tensor index -> IR value name
        self.static_shape: dict[str, list[int]] = {}  # IR value name -> shape as stored in the file
        self.producer: dict[str, Node] = {}
        self.fp16_consts: set[str] = set()  # constants stored as float16 in the file
        self.kind = ""  # the op being translated

    def error(self, what: str) -> TFLiteImportError:
        return TFLiteImportError(f"{self.path}: {what}")

    # --- tensors -------------------------------------------------------------------------------------------
    def tensor_name(self, i: int) -> str:
        return self.sg.Tensors(i).Name().decode()

    def shape(self, i: int) -> list[int]:
        t = self.sg.Tensors(i)
        return [int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else []

    def raw_const(self, i: int) -> np.ndarray | None:
        """The tensor's stored data, dequantized to float32 when it carries quantization; None if not const."""
        t = self.sg.Tensors(i)
        buf = self.model.Buffers(t.Buffer())
        if buf is None or buf.DataLength() == 0:
            return None
        if t.Type() not in _NP_DTYPES:
            raise self.error(f"constant {t.Name().decode()!r} has unsupported type {t.Type()}")
        arr = np.frombuffer(buf.DataAsNumpy().tobytes(), dtype=_NP_DTYPES[t.Type()]).reshape(self.shape(i))
        q = t.Quantization()
        if q is not None and q.ScaleLength() > 0 and t.Type() in _QUANTIZED:
            scale = q.ScaleAsNumpy().astype(np.float64)
            zero = q.ZeroPointAsNumpy().astype(np.float64) if q.ZeroPointLength() else np.zeros_like(scale)
            if scale.size == 1:  # per-tensor; keep the stored shape (scalars stay scalars)
                scale, zero = scale[0], zero[0]
            else:  # per-channel: broadcast along the quantized dimension
                bshape = [1] * arr.ndim
                bshape[q.QuantizedDimension()] = scale.size
                scale, zero = scale.reshape(bshape), zero.reshape(bshape)
            return ((arr.astype(np.float64) - zero) * scale).astype(np.float32)
        if arr.dtype == np.float16:
            return arr.astype(np.float32)
        if arr.dtype == np.int64:
            return arr.astype(np.int32)
        return arr.copy()

    def value(self, i: int) -> str:
        """IR name for tensor ``i`` as an op input (a constant is registered on first use)."""
        if i in self.names:
            return self.names[i]
        arr = self.raw_const(i)
        if arr is None:
            raise self.error(f"tensor {self.tensor_name(i)!r} is used before it is produced")
        name = self.const(self.tensor_name(i), arr)
        self.static_shape[name] = list(arr.shape)
        self.names[i] = name
        return name

    def const(self, name: str, arr: np.ndarray) -> str:
        return self.ed.const(name, arr)

    def const_of(self, name: str) -> np.ndarray | None:
        return self.graph.consts.get(name)

    # --- nodes ---------------------------------------------------------------------------------------------
    def emit(self, name: str, op: str, inputs: list[str], attrs: dict[str, Any] | None = None,
             shape: list[int] | None = None) -> str:
        name = self.ed.emit(name, op, inputs, attrs)
        self.producer[name] = self.ed.inserts[None][-1]
        if shape is not None:
            self.static_shape[name] = shape
        return name

    def emit_chain(self, out: int, steps: list[Step], first_input: str) -> None:
        """Emit ``steps`` feeding each into the next; the last one is named after TFLite output tensor ``out``
        so every TFLite tensor name stays addressable in the IR."""
        out_name = self.tensor_name(out)
        prev = first_input
        for k, (op, extra, attrs) in enumerate(steps):
            name = out_name if k == len(steps) - 1 else f"{out_name}/{op}"
            prev = self.emit(name, op, [prev, *extra], attrs, self.shape(out))
        self.names[out] = prev

    def activation(self, code: int, where: str) -> list[Step]:
        if code not in _ACTIVATIONS:
            raise self.error(f"fused activation {code} on {where!r} is not supported")
        op = _ACTIVATIONS[code]
        return [(op, [], {})] if op else []

    def bias_step(self, ins: list[int]) -> list[Step]:
        if len(ins) < 3 or ins[2] < 0:
            return []
        bias = self.value(ins[2])
        arr = self.const_of(bias)
        if arr is not None and not np.any(arr):
            return []  # the converter adds all-zero biases to bias-free convs; adding zero changes nothing
        return [("BiasAdd", [bias], {"data_format": "NHWC"})]

    def placeholder(self, i: int) -> None:
        shape = self.shape(i)
        attrs = {"dtype": "float32", "shape": [-1] * (len(shape) - 1) + shape[-1:]}
        self.names[i] = self.emit(self.tensor_name(i), "Placeholder", [], attrs, shape)

    def finish(self) -> Graph:
        self.ed.finish()
        self.graph.inputs = [self.names[self.sg.Inputs(k)] for k in range(self.sg.InputsLength())]
        self.graph.outputs = [self.names[self.sg.Outputs(k)] for k in range(self.sg.OutputsLength())]
        return self.graph
