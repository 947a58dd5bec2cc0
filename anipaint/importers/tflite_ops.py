"""The TFLite op table: one function per TFLite builtin (or custom) op, emitting IR nodes in TensorFlow's vocabulary.

Each handler takes the reader (:class:`.tflite_reader.Reader`), the op's input and output tensor
indices and its parsed options. Layouts become TensorFlow's (conv filters OHWI -> HWIO, depthwise
[1, H, W, C*M] -> [H, W, C, M], transposed-conv OHWI -> HWOI), fused activations become their own nodes.
Activation ``QUANTIZE`` / ``DEQUANTIZE`` become ``Identity`` (we run in float); on constants they fold.
Shapes stay as stored here; :mod:`.ir_passes` makes them follow the live size afterwards.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import tflite

from anipaint.importers.tflite_reader import Reader, Step

Handler = Callable[["Reader", list[int], list[int], Any], None]
OPS: dict[str, Handler] = {}
OPTIONS: dict[str, type] = {}  # op -> its options class, for the ops whose options a handler reads

PADDING = {tflite.Padding.SAME: "SAME", tflite.Padding.VALID: "VALID"}
_MIRROR = {tflite.MirrorPadMode.REFLECT: "REFLECT", tflite.MirrorPadMode.SYMMETRIC: "SYMMETRIC"}


def op(*kinds: str, options: type | None = None) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for kind in kinds:
            OPS[kind] = fn
            if options is not None:
                OPTIONS[kind] = options
        return fn

    return register


def _simple(ir_op: str, options: type | None = None) -> Handler:
    """Ops that map one to one (inputs in order), with the fused activation their options may carry."""

    def run(r: Reader, ins: list[int], outs: list[int], opts: Any) -> None:
        steps = [(ir_op, [r.value(i) for i in ins[1:]], {})]
        if opts is not None and hasattr(opts, "FusedActivationFunction"):
            steps += r.activation(opts.FusedActivationFunction(), r.tensor_name(outs[0]))
        r.emit_chain(outs[0], steps, r.value(ins[0]))

    return run


for _kind, (_ir, _opts) in {
    "ADD": ("AddV2", tflite.AddOptions), "SUB": ("Sub", tflite.SubOptions), "MUL": ("Mul", tflite.MulOptions),
    "DIV": ("RealDiv", tflite.DivOptions), "SQUARED_DIFFERENCE": ("SquaredDifference", None),
    "MAXIMUM": ("Maximum", None), "MINIMUM": ("Minimum", None), "FLOOR_DIV": ("FloorDiv", None),
    "RSQRT": ("Rsqrt", None), "SQRT": ("Sqrt", None), "TANH": ("Tanh", None), "RELU": ("Relu", None),
    "LOGISTIC": ("Sigmoid", None), "HARD_SWISH": ("HardSwish", None), "PAD": ("Pad", None),
    "TRANSPOSE": ("Transpose", None),
}.items():
    op(_kind, options=_opts)(_simple(_ir, _opts))


@op("QUANTIZE", "DEQUANTIZE")
def _dequantize(r: Reader, ins: list[int], outs: list[int], opts: Any) -> None:
    folded = r.raw_const(ins[0]) if ins[0] not in r.names else None
    if folded is None:
        r.emit_chain(outs[0], [("Identity", [], {})], r.value(ins[0]))
        return
    # fp16/int8 weights: fold into a float32 constant under the output's name
    name = r.const(r.tensor_name(outs[0]), folded.astype(np.float32))
    r.static_shape[name] = list(folded.shape)
    if r.sg.Tensors(ins[0]).Type() == tflite.TensorType.FLOAT16:
        r.fp16_consts.add(name)
    r.names[outs[0]] = name


def _filter(r: Reader, i: int, out_name: str) -> np.ndarray:
    filt = r.const_of(r.value(i))
    if filt is None:
        raise r.error(f"{out_name!r} has a non-constant filter")
    return filt


@op("CONV_2D", options=tflite.Conv2DOptions)
@op("DEPTHWISE_CONV_2D", options=tflite.DepthwiseConv2DOptions)
def _conv(r: Reader, ins: list[int], outs: list[int], opts: Any) -> None:
    out_name = r.tensor_name(outs[0])
    x, filt = r.value(ins[0]), _filter(r, ins[1], out_name)
    if isinstance(opts, tflite.Conv2DOptions):
        kind, laid = "Conv2D", filt.transpose(1, 2, 3, 0)  # OHWI -> HWIO
    else:  # [1, H, W, C*M] -> [H, W, C, M]
        c_in = r.static_shape[x][-1]
        _, fh, fw, cm = filt.shape
        kind, laid = "DepthwiseConv2dNative", filt.reshape(fh, fw, c_in, cm // c_in)
    w = r.const(f"{out_name}/filter", np.ascontiguousarray(laid))
    steps = [(kind, [w], {
        "strides": [1, opts.StrideH(), opts.StrideW(), 1],
        "padding": PADDING[opts.Padding()],
        "dilations": [1, opts.DilationHFactor(), opts.DilationWFactor(), 1],
        "data_format": "NHWC",
    })]
    steps += r.bias_step(ins)
    steps += r.activation(opts.FusedActivationFunction(), out_name)
    r.emit_chain(outs[0], steps, x)


@op("CUSTOM:Convolution2DTransposeBias")
def _transpose_conv_bias(r: Reader, ins: list[int], outs: list[int], opts: Any) -> None:
    """MediaPipe's transposed convolution with bias; options are TfLiteTransposeConvParams (padding, strides)."""
    out_name = r.tensor_name(outs[0])
    padding, stride_w, stride_h = struct.unpack("<3i", bytes(opts[:12]))
    if padding != 1:  # TfLitePadding (the C enum, not the schema's): 1 SAME, 2 VALID
        raise r.error(f"{out_name!r}: transposed convolution with padding {padding} is not supported")
    filt = _filter(r, ins[1], out_name)  # [O, H, W, I]
    w = r.const(f"{out_name}/filter", np.ascontiguousarray(filt.transpose(1, 2, 0, 3)))  # -> HWOI, as TF
    x = r.value(ins[0])
    parts = [r.ed.dim(x, 0)]  # SAME: the output is the live input size times the strides
    for axis, stride in ((1, stride_h), (2, stride_w)):
        factor = r.const(f"{out_name}/output_shape/stride{axis}", np.array(stride, np.int32))
        parts.append(r.emit(f"{out_name}/output_shape/mul{axis}", "Mul", [r.ed.dim(x, axis), factor]))
    size = r.ed.pack(f"{out_name}/output_shape", [*parts, int(filt.shape[0])])
    attrs = {"strides": [1, stride_h, stride_w, 1], "padding": "SAME", "data_format": "NHWC"}
    r.emit_chain(outs[0], [("Conv2DBackpropInput", [w, x], attrs), *r.bias_step(ins)], size)


@op("MEAN", "SUM", options=tflite.ReducerOptions)
def _reduce(r: Reader, ins: list[int], outs: list[int], opts: Any) -> None:
    keep = bool(opts.KeepDims()) if opts is not None else False
    kind = "Mean" if r.kind == "MEAN" else "Sum"
    r.emit_chain(outs[0], [(kind, [r.value(ins[1])], {"keep_dims": keep})], r.value(ins[0]))


@op("AVERAGE_POOL_2D", options=tflite.Pool2DOptions)
def _average_pool(r: Reader, ins: list[int], outs: list[int], opts: Any) -> None:
    x, out_name = r.value(ins[0]), r.tensor_name(outs[0])
    src = r.static_shape.get(x, [])
    if not (len(src) == 4 and opts.FilterHeight() == src[1] and opts.FilterWidth() == src[2]
            and r.shape(outs[0])[1:3] == [1, 1]):
        raise r.error(f"AVERAGE_POOL_2D {out_name!r} other than a global average is not supported")
    axes = r.const(f"{out_name}/axes", np.array([1, 2], np.int32))  # a global average: any input size
    steps = [("Mean", [axes], {"keep_dims": True})] + r.activation(opts.FusedActivationFunction(), out_name)
    r.emit_chain(outs[0], steps, x)


@op("LEAKY_RELU", options=tflite.LeakyReluOptions)
def _leaky_relu(r: Reader, ins: list[int], outs: list[int], opts: Any) -> None:
    r.emit_chain(outs[0], [("LeakyRelu", [], {"alpha": float(opts.Alpha())})], r.value(ins[0]))


@op("MIRROR_PAD", options=tflite.MirrorPadOptions)
def _mirror_pad(r: Reader, ins: list[int], outs: list[int], opts: Any) -> None:
    mode = _MIRROR[opts.Mode()] if opts is not None else "REFLECT"
    r.emit_chain(outs[0], [("MirrorPad", [r.value(ins[1])], {"mode": mode})], r.value(ins[0]))


@op("RESIZE_BILINEAR", options=tflite.ResizeBilinearOptions)
def _resize(r: Reader, ins: list[int], outs: list[int], opts: Any) -> None:
    attrs = {"align_corners": bool(opts.AlignCorners()), "half_pixel_centers": bool(opts.HalfPixelCenters())}
    r.emit_chain(outs[0], [("ResizeBilinear", [r.value(ins[1])], attrs)], r.value(ins[0]))


@op("RESHAPE", options=tflite.ReshapeOptions)
def _reshape(r: Reader, ins: list[int], outs: list[int], opts: Any) -> None:
    if len(ins) > 1 and ins[1] >= 0:
        shape = r.value(ins[1])
    else:  # old files: the shape lives in the options only
        shape = r.const(f"{r.tensor_name(outs[0])}/shape", opts.NewShapeAsNumpy().astype(np.int32))
    r.emit_chain(outs[0], [("Reshape", [shape], {})], r.value(ins[0]))


@op("SOFTMAX", options=tflite.SoftmaxOptions)
def _softmax(r: Reader, ins: list[int], outs: list[int], opts: Any) -> None:
    beta = float(opts.Beta()) if opts is not None else 1.0
    steps: list[Step] = []
    if beta != 1.0:  # TF's Softmax has no beta: scale the logits first
        steps.append(("Mul", [r.const(f"{r.tensor_name(outs[0])}/beta", np.array(beta, np.float32))], {}))
    steps.append(("Softmax", [], {}))
    r.emit_chain(outs[0], steps, r.value(ins[0]))


@op("CONCATENATION", options=tflite.ConcatenationOptions)
def _concat(r: Reader, ins: list[int], outs: list[int], opts: Any) -> None:
    out_name = r.tensor_name(outs[0])
    if opts.FusedActivationFunction():
        raise r.error(f"fused activation on CONCATENATION {out_name!r}")
    values = [r.value(i) for i in ins]
    axis = r.const(f"{out_name}/axis", np.array(opts.Axis(), np.int32))
    r.names[outs[0]] = r.emit(out_name, "ConcatV2", [*values, axis], {"N": len(values)}, r.shape(outs[0]))
