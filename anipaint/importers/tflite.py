"""TFLite flatbuffers -> the graph IR (:mod:`anipaint.networks.ir`), and the converters built on it.

The file is read with the ``tflite`` flatbuffer schema package only (no interpreter): constants are
dequantized to float32 (int8 per-channel ``(q - zero_point) * scale``, int32 biases ``q * scale``, float16
``DEQUANTIZE`` nodes folded), and builtin ops are translated into TensorFlow's op vocabulary with TF layouts
(conv filters OHWI -> HWIO, depthwise [1, H, W, C*M] -> [H, W, C, M], fused activations as their own nodes).
Activation ``QUANTIZE`` / ``DEQUANTIZE`` pairs become ``Identity``: we run the network in float.

TFLite bakes the converter's input size into ``RESHAPE`` shapes and ``RESIZE_BILINEAR`` sizes. The reader
rewrites those into shape arithmetic on the live tensors (``Shape`` / ``StridedSlice`` / ``Mul`` / ``Pack``,
the same pattern TensorFlow's own graphs use), so the imported graph runs at any input size; each rewrite is
recorded in ``Graph.meta["rewrites"]``. Epsilons that the float16 export flushed to zero are restored (see
:meth:`_Reader.restore_flushed_epsilons`) and listed in ``Graph.meta["repairs"]``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import tflite
from tflite.utils import BUILTIN_OPCODE2NAME

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
_ACTIVATIONS = {
    tflite.ActivationFunctionType.NONE: None,
    tflite.ActivationFunctionType.RELU: "Relu",
    tflite.ActivationFunctionType.TANH: "Tanh",
}
_PADDING = {tflite.Padding.SAME: "SAME", tflite.Padding.VALID: "VALID"}
_MIRROR = {tflite.MirrorPadMode.REFLECT: "REFLECT", tflite.MirrorPadMode.SYMMETRIC: "SYMMETRIC"}
# elementwise ops without options (other than a fused activation) -> TF op
_ELEMENTWISE = {
    "ADD": "AddV2",
    "SUB": "Sub",
    "MUL": "Mul",
    "DIV": "RealDiv",
    "SQUARED_DIFFERENCE": "SquaredDifference",
    "MAXIMUM": "Maximum",
    "MINIMUM": "Minimum",
    "FLOOR_DIV": "FloorDiv",
}
_UNARY = {"RSQRT": "Rsqrt", "SQRT": "Sqrt", "TANH": "Tanh", "RELU": "Relu"}
_OPTIONS = {  # op -> options class, for the ops whose options we read
    "CONV_2D": tflite.Conv2DOptions,
    "DEPTHWISE_CONV_2D": tflite.DepthwiseConv2DOptions,
    "ADD": tflite.AddOptions,
    "SUB": tflite.SubOptions,
    "MUL": tflite.MulOptions,
    "DIV": tflite.DivOptions,
    "MEAN": tflite.ReducerOptions,
    "SUM": tflite.ReducerOptions,
    "LEAKY_RELU": tflite.LeakyReluOptions,
    "MIRROR_PAD": tflite.MirrorPadOptions,
    "RESIZE_BILINEAR": tflite.ResizeBilinearOptions,
    "SOFTMAX": tflite.SoftmaxOptions,
    "RESHAPE": tflite.ReshapeOptions,
    "CONCATENATION": tflite.ConcatenationOptions,
}


class TFLiteImportError(ValueError):
    """The file is not a TFLite model this reader can translate."""


class _Reader:
    """Walks one TFLite subgraph and emits IR nodes; one instance per file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        data = path.read_bytes()
        if data[4:8] != b"TFL3":
            raise TFLiteImportError(f"{path} is not a TFLite flatbuffer (no TFL3 identifier)")
        self.model = tflite.Model.GetRootAsModel(data, 0)
        if self.model.SubgraphsLength() != 1:
            raise TFLiteImportError(f"{path}: expected one subgraph, found {self.model.SubgraphsLength()}")
        self.sg = self.model.Subgraphs(0)
        self.nodes: list[Node] = []
        self.consts: dict[str, np.ndarray] = {}
        self.names: dict[int, str] = {}  # tensor index -> IR value name
        self.used: set[str] = set()
        self.static_shape: dict[str, list[int]] = {}  # IR value name -> shape as stored in the file
        self.producer: dict[str, Node] = {}
        self.rewrites: list[dict[str, Any]] = []
        self.fixed_size: list[str] = []
        self._shape_cache: dict[tuple[str, int], str] = {}
        self.fp16_consts: set[str] = set()  # constants stored as float16 in the file
        self.repairs: list[dict[str, Any]] = []

    # --- tensors -------------------------------------------------------------------------------------------
    def _unique(self, name: str) -> str:
        base, k = name, 1
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name

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
            raise TFLiteImportError(f"{self.path}: constant {t.Name().decode()!r} has unsupported type {t.Type()}")
        arr = np.frombuffer(buf.DataAsNumpy().tobytes(), dtype=_NP_DTYPES[t.Type()]).reshape(self.shape(i))
        q = t.Quantization()
        if q is not None and q.ScaleLength() > 0 and t.Type() in (tflite.TensorType.INT8, tflite.TensorType.UINT8,
                                                                   tflite.TensorType.INT16, tflite.TensorType.INT32):
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
            raise TFLiteImportError(f"{self.path}: tensor {self.tensor_name(i)!r} is used before it is produced")
        name = self._unique(self.tensor_name(i))
        self.consts[name] = arr
        self.static_shape[name] = list(arr.shape)
        self.names[i] = name
        return name

    def const(self, name: str, arr: np.ndarray) -> str:
        name = self._unique(name)
        self.consts[name] = arr
        return name

    def const_of(self, name: str) -> np.ndarray | None:
        return self.consts.get(name)

    # --- nodes ---------------------------------------------------------------------------------------------
    def emit(self, name: str, op: str, inputs: list[str], attrs: dict[str, Any] | None = None,
             shape: list[int] | None = None) -> str:
        node = Node(self._unique(name), op, inputs, attrs or {})
        self.nodes.append(node)
        self.producer[node.name] = node
        if shape is not None:
            self.static_shape[node.name] = shape
        return node.name

    def emit_chain(self, out: int, steps: list[tuple[str, list[str], dict[str, Any]]], first_input: str) -> None:
        """Emit ``steps`` (op, extra inputs, attrs) feeding each into the next; the last one is named after
        TFLite output tensor ``out`` so every TFLite tensor name stays addressable in the IR."""
        out_name = self.tensor_name(out)
        prev = first_input
        for k, (op, extra, attrs) in enumerate(steps):
            last = k == len(steps) - 1
            name = out_name if last else f"{out_name}/{op}"
            prev = self.emit(name, op, [prev, *extra], attrs, self.shape(out))
        self.names[out] = prev

    def activation(self, code: int, where: str) -> list[tuple[str, list[str], dict[str, Any]]]:
        if code not in _ACTIVATIONS:
            raise TFLiteImportError(f"{self.path}: fused activation {code} on {where!r} is not supported")
        op = _ACTIVATIONS[code]
        return [(op, [], {})] if op else []

    # --- shape arithmetic for size-independent graphs ------------------------------------------------------
    def dim(self, ref: str, axis: int) -> str:
        """Scalar int32 ``Shape(ref)[axis]`` (Shape + StridedSlice with shrink_axis_mask, as TF emits it)."""
        key = (ref, axis)
        if key not in self._shape_cache:
            shape = self.shape_of(ref)
            begin = self.const(f"{ref}/dim{axis}/begin", np.array([axis], np.int32))
            end = self.const(f"{ref}/dim{axis}/end", np.array([axis + 1], np.int32))
            strides = self.const(f"{ref}/dim{axis}/strides", np.array([1], np.int32))
            self._shape_cache[key] = self.emit(
                f"{ref}/dim{axis}", "StridedSlice", [shape, begin, end, strides],
                {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 1},
            )
        return self._shape_cache[key]

    def shape_of(self, ref: str) -> str:
        if (ref, -1) not in self._shape_cache:
            self._shape_cache[(ref, -1)] = self.emit(f"{ref}/Shape", "Shape", [ref], {"out_type": "int32"})
        return self._shape_cache[(ref, -1)]

    def pack(self, name: str, parts: list[str | int]) -> str:
        inputs = [p if isinstance(p, str) else self.const(f"{name}/{k}", np.array(p, np.int32))
                  for k, p in enumerate(parts)]
        return self.emit(name, "Pack", inputs, {"axis": 0, "N": len(inputs)})

    def data_ancestors(self, name: str, limit: int = 24) -> list[str]:
        """Values upstream of ``name`` along first (data) inputs, nearest first."""
        out: list[str] = []
        while name in self.producer and len(out) < limit:
            node = self.producer[name]
            if not node.inputs:
                break
            name = node.inputs[0]
            out.append(name)
        return out

    def dynamic_reshape(self, x: str, target: list[int], out_name: str) -> str | None:
        """A shape tensor equal to ``target`` at the stored size that follows the live size, or None."""
        # 1. The target is the shape of a tensor upstream (an "unflatten" back to NHWC): take its live shape.
        for anc in self.data_ancestors(x):
            if anc not in self.consts and self.static_shape.get(anc) == target:
                self.rewrites.append({"op": "Reshape", "name": out_name, "stored": target, "to": f"Shape({anc})"})
                return self.shape_of(anc)
        # 2. Keep batch, unit and channel dims; the one remaining (flattened spatial) dim becomes -1.
        src = self.static_shape.get(x, [])
        parts: list[str | int] = []
        free = 0
        for k, d in enumerate(target):
            if k == 0 and src and d == src[0]:
                parts.append(self.dim(x, 0))
            elif d == 1 or (k == len(target) - 1 and src and d == src[-1]):
                parts.append(d)
            else:
                parts.append(-1)
                free += 1
        if free > 1:
            return None
        described = ["N" if isinstance(p, str) else p for p in parts]
        self.rewrites.append({"op": "Reshape", "name": out_name, "stored": target, "to": described})
        return self.pack(f"{out_name}/shape", parts)

    # --- ops -----------------------------------------------------------------------------------------------
    def translate(self) -> Graph:
        op_counts: Counter[str] = Counter()
        for k in range(self.sg.InputsLength()):
            i = self.sg.Inputs(k)
            shape = self.shape(i)
            name = self.emit(self.tensor_name(i), "Placeholder", [],
                             {"dtype": "float32", "shape": [-1] * (len(shape) - 1) + shape[-1:]}, shape)
            self.names[i] = name
        for k in range(self.sg.OperatorsLength()):
            op = self.sg.Operators(k)
            code = self.model.OperatorCodes(op.OpcodeIndex())
            builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
            kind = BUILTIN_OPCODE2NAME.get(builtin, str(builtin))
            op_counts[kind] += 1
            ins = [op.Inputs(j) for j in range(op.InputsLength())]
            outs = [op.Outputs(j) for j in range(op.OutputsLength())]
            opts = None
            if kind in _OPTIONS and op.BuiltinOptions() is not None:
                table = op.BuiltinOptions()
                opts = _OPTIONS[kind]()
                opts.Init(table.Bytes, table.Pos)
            self.translate_op(kind, ins, outs, opts)
        self.restore_flushed_epsilons()
        # drop constants nothing reads (filters re-laid under new names, skipped all-zero biases)
        read = {i for n in self.nodes for i in n.inputs}
        self.consts = {k: v for k, v in self.consts.items() if k in read}
        inputs = [self.names[self.sg.Inputs(k)] for k in range(self.sg.InputsLength())]
        outputs = [self.names[self.sg.Outputs(k)] for k in range(self.sg.OutputsLength())]
        smallest = min((s[1] for n, s in self.static_shape.items()
                        if len(s) == 4 and n in self.producer and s[1] > 1), default=0)
        in_shape = self.shape(self.sg.Inputs(0))
        meta = {
            "source_format": "tflite",
            "source": self.path.name,
            "layout": "NHWC",
            "input_shape": in_shape,  # the size the file was exported for (graph_shapes reads this key)
            "tflite_ops": dict(sorted(op_counts.items())),
            "rewrites": self.rewrites,
            "repairs": self.repairs,
            "fixed_size_ops": self.fixed_size,
            # the network's total stride: H and W should be multiples of it for the 2x upsamples to line up
            "size_multiple": int(in_shape[1] // smallest) if smallest and len(in_shape) == 4 else 1,
            "notes": (
                "Weights dequantized to float32; activation QUANTIZE/DEQUANTIZE became Identity. "
                "Constant RESHAPE shapes and RESIZE_BILINEAR sizes rewritten to follow the live input size."
            ),
        }
        return Graph(self.nodes, self.consts, inputs, outputs, meta)

    def translate_op(self, kind: str, ins: list[int], outs: list[int], opts: Any) -> None:
        out = outs[0] if outs else -1
        out_name = self.tensor_name(out)

        if kind in ("QUANTIZE", "DEQUANTIZE"):
            folded = self.raw_const(ins[0]) if ins[0] not in self.names else None
            if folded is not None:  # fp16/int8 weights: fold into a float32 constant under the output's name
                name = self.const(out_name, folded.astype(np.float32))
                self.static_shape[name] = list(folded.shape)
                if self.sg.Tensors(ins[0]).Type() == tflite.TensorType.FLOAT16:
                    self.fp16_consts.add(name)
                self.names[out] = name
            else:
                self.emit_chain(out, [("Identity", [], {})], self.value(ins[0]))
            return

        if kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            x, filt = self.value(ins[0]), self.const_of(self.value(ins[1]))
            if filt is None:
                raise TFLiteImportError(f"{self.path}: {out_name!r} has a non-constant filter")
            if kind == "CONV_2D":
                op, laid = "Conv2D", filt.transpose(1, 2, 3, 0)  # OHWI -> HWIO
            else:  # [1, H, W, C*M] -> [H, W, C, M]
                c_in = self.static_shape[x][-1]
                _, fh, fw, cm = filt.shape
                op, laid = "DepthwiseConv2dNative", filt.reshape(fh, fw, c_in, cm // c_in)
            w = self.const(f"{out_name}/filter", np.ascontiguousarray(laid))
            steps = [(op, [w], {
                "strides": [1, opts.StrideH(), opts.StrideW(), 1],
                "padding": _PADDING[opts.Padding()],
                "dilations": [1, opts.DilationHFactor(), opts.DilationWFactor(), 1],
                "data_format": "NHWC",
            })]
            steps += self.bias_step(ins)
            steps += self.activation(opts.FusedActivationFunction(), out_name)
            self.emit_chain(out, steps, x)
            return

        if kind in _ELEMENTWISE:
            a, b = self.value(ins[0]), self.value(ins[1])
            steps = [(_ELEMENTWISE[kind], [b], {})]
            if opts is not None and hasattr(opts, "FusedActivationFunction"):
                steps += self.activation(opts.FusedActivationFunction(), out_name)
            self.emit_chain(out, steps, a)
            return

        if kind in _UNARY:
            self.emit_chain(out, [(_UNARY[kind], [], {})], self.value(ins[0]))
            return

        if kind in ("MEAN", "SUM"):
            keep = bool(opts.KeepDims()) if opts is not None else False
            op = "Mean" if kind == "MEAN" else "Sum"
            self.emit_chain(out, [(op, [self.value(ins[1])], {"keep_dims": keep})], self.value(ins[0]))
            return

        if kind == "LEAKY_RELU":
            self.emit_chain(out, [("LeakyRelu", [], {"alpha": float(opts.Alpha())})], self.value(ins[0]))
            return

        if kind == "MIRROR_PAD":
            mode = _MIRROR[opts.Mode()] if opts is not None else "REFLECT"
            self.emit_chain(out, [("MirrorPad", [self.value(ins[1])], {"mode": mode})], self.value(ins[0]))
            return

        if kind == "PAD":
            self.emit_chain(out, [("Pad", [self.value(ins[1])], {})], self.value(ins[0]))
            return

        if kind == "RESIZE_BILINEAR":
            x = self.value(ins[0])
            size = self.resize_size(x, self.value(ins[1]), out_name)
            attrs = {"align_corners": bool(opts.AlignCorners()), "half_pixel_centers": bool(opts.HalfPixelCenters())}
            self.emit_chain(out, [("ResizeBilinear", [size], attrs)], x)
            return

        if kind == "RESHAPE":
            x = self.value(ins[0])
            if len(ins) > 1 and ins[1] >= 0:
                shape_in = self.value(ins[1])
                target = self.const_of(shape_in)
            else:  # old files: the shape lives in the options only
                target = opts.NewShapeAsNumpy().astype(np.int32)
                shape_in = self.const(f"{out_name}/shape", target)
            if target is not None:
                dynamic = self.dynamic_reshape(x, [int(d) for d in target], out_name)
                if dynamic is None:
                    self.fixed_size.append(out_name)
                else:
                    shape_in = dynamic
            self.emit_chain(out, [("Reshape", [shape_in], {})], x)
            return

        if kind == "TRANSPOSE":
            self.emit_chain(out, [("Transpose", [self.value(ins[1])], {})], self.value(ins[0]))
            return

        if kind == "SOFTMAX":
            beta = float(opts.Beta()) if opts is not None else 1.0
            steps: list[tuple[str, list[str], dict[str, Any]]] = []
            if beta != 1.0:  # TF's Softmax has no beta: scale the logits first
                steps.append(("Mul", [self.const(f"{out_name}/beta", np.array(beta, np.float32))], {}))
            steps.append(("Softmax", [], {}))
            self.emit_chain(out, steps, self.value(ins[0]))
            return

        if kind == "CONCATENATION":
            values = [self.value(i) for i in ins]
            axis = self.const(f"{out_name}/axis", np.array(opts.Axis(), np.int32))
            node = self.emit(out_name, "ConcatV2", [*values, axis], {"N": len(values)}, self.shape(out))
            if opts.FusedActivationFunction():
                raise TFLiteImportError(f"{self.path}: fused activation on CONCATENATION {out_name!r}")
            self.names[out] = node
            return

        raise TFLiteImportError(f"{self.path}: TFLite op {kind} ({out_name!r}) is not supported")

    def restore_flushed_epsilons(self) -> None:
        """Put back the epsilons the float16 export flushed to zero.

        AnimeGANv3's norms compute ``(x - mean) / sqrt(var + 1e-5)`` and its attention ``a / (1e-9 + sum(a))``
        (the float32 Shinkai v3 graph from the same release holds exactly these constants). In the fp16 file
        both are 0, so a flat input (a black video frame) gives ``rsqrt(0)`` = inf and a NaN picture, in
        LiteRT too. Only zero float16 scalars added right before a Sqrt/Rsqrt or a divisor are touched.
        """
        users: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in n.inputs:
                users.setdefault(i, []).append(n)
        for n in self.nodes:
            if n.op not in ("Add", "AddV2"):
                continue
            zeros = [i for i in n.inputs if i in self.fp16_consts and self.consts[i].shape == ()
                     and self.consts[i] == 0]
            if len(zeros) != 1:
                continue
            after = users.get(n.name, [])
            if after and all(u.op in ("Sqrt", "Rsqrt") for u in after):
                eps = 1e-5
            elif after and all(u.op == "RealDiv" and u.inputs[1] == n.name for u in after):
                eps = 1e-9
            else:
                continue
            k = n.inputs.index(zeros[0])
            n.inputs[k] = self.const(f"{n.name}/epsilon", np.array(eps, np.float32))
            self.repairs.append({"node": n.name, "was": 0.0, "now": eps,
                                 "why": "epsilon flushed to zero by the float16 export"})

    def bias_step(self, ins: list[int]) -> list[tuple[str, list[str], dict[str, Any]]]:
        if len(ins) < 3 or ins[2] < 0:
            return []
        bias = self.value(ins[2])
        arr = self.const_of(bias)
        if arr is not None and not np.any(arr):
            return []  # the converter adds all-zero biases to bias-free convs; adding zero changes nothing
        return [("BiasAdd", [bias], {"data_format": "NHWC"})]

    def resize_size(self, x: str, size: str, out_name: str) -> str:
        """``size`` as ``k * Shape(x)[1:3]`` when the stored size is an integer multiple of the stored input."""
        stored = self.const_of(size)
        src = self.static_shape.get(x, [])
        if stored is None or len(src) != 4:
            return size
        ratios = {int(stored[0]) / src[1], int(stored[1]) / src[2]}
        if len(ratios) != 1 or not float(next(iter(ratios))).is_integer():
            self.fixed_size.append(out_name)
            return size
        k = int(next(iter(ratios)))
        parts = []
        for axis in (1, 2):
            factor = self.const(f"{out_name}/size/mul{axis}/x", np.array(k, np.int32))
            parts.append(self.emit(f"{out_name}/size/mul{axis}", "Mul", [factor, self.dim(x, axis)]))
        self.rewrites.append({"op": "ResizeBilinear", "name": out_name, "stored": [int(v) for v in stored],
                              "to": f"{k} * Shape(input)[1:3]"})
        return self.pack(f"{out_name}/size", parts)


def read_tflite(path: Path | str) -> Graph:
    """Read a TFLite flatbuffer into the IR: float32 weights, TF ops and layouts, size-independent shapes."""
    return _Reader(Path(path)).translate()


# --- converters ------------------------------------------------------------------------------------------------
def convert_graph(sources: list[Path], out_dir: Path) -> dict[str, Any]:
    """A TFLite network run by the graph executor -> ``out_dir/model.pt`` holding ``Graph.to_dict()``."""
    import torch

    graph = read_tflite(sources[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.save(graph.to_dict(), out_dir / "model.pt")
    return {
        "parameters": graph.parameter_count(),
        "source_format": "tflite",
        "size_multiple": graph.meta["size_multiple"],
        "rewrites": len(graph.meta["rewrites"]),
        "fixed_size_ops": list(graph.meta["fixed_size_ops"]),
        "notes": graph.meta["notes"],
    }
