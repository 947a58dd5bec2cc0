"""int8 for an imported graph's dense 3×3 convolutions (the ``int8`` backend of the v3 styles and the other graphs).

PyTorch 2 export quantisation (PT2E) with torchao's ``X86InductorQuantizer``, lowered by AOTInductor to oneDNN's
quantised convolutions (``qconv_pointwise``, VNNI or AMX kernels):

* only dense 3×3 convolutions are quantised (10 of v3's 12, about 57 % of its multiply-adds: see
  :data:`KEEP_BEFORE_LAST`); the 7×7 first and last layers, the 1×1 convolutions, the attention, the norms and the
  upsamplings stay as the ``compiled`` form has them;
* weights symmetric int8 per output channel, activations uint8 per tensor with ranges from torchao's histogram
  observer (a search for the range of least squared error) over real photos: min/max ranges cost 2-4 dB here,
  and percentile clipping is reported to darken image-to-image networks;
* int8-mixed-bf16 where the CPU multiplies bf16 natively: each quantised convolution gives a bf16 output, so the
  activations between layers stay 2 bytes; the quantise step fuses into the pad / LeakyReLU loop before it.

The fusions are Inductor patterns that torchao registers when its quantizer module is imported; without that
import the quantised ops compile to plain float convolutions and gain nothing (:func:`quantised_in` counts the
oneDNN int8 calls in a package to check). Whether the result is faithful is :mod:`anipaint.engine.select`'s
call, per style, like every backend's.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from anipaint.engine.compile import graph_program
from anipaint.engine.compile.inductor import compile_package
from anipaint.engine.runtime.cpu import cpu_flags

QCONV_CALL = "aoti_torch_cpu__qconv_pointwise"  # how a package's C++ calls oneDNN's int8 convolution
INT8_DOT_FLAGS = {"avx512_vnni", "avx_vnni", "amx_int8"}


def has_int8_dot() -> bool:
    """Whether the CPU has int8 dot-product instructions (VNNI, AMX): without them int8 does not pay."""
    return bool(INT8_DOT_FLAGS & set(cpu_flags()))


# The dense 3×3 convolutions just before the last one stay in bf16. A one-layer-at-a-time sweep on v3-hayao
# (docs/benchmarks.md) found every other layer's int8 error washed out by the norms after it, but these two, at
# 256² and 512² in the decoder, left a few pixels of a small picture more than 32 levels off; in bf16 none are.
KEEP_BEFORE_LAST = 2


def int8_convs(network) -> list[str]:
    """The graph's dense 3×3 convolutions (node names) with constant weights, but the :data:`KEEP_BEFORE_LAST`
    before the last one: what this backend quantises."""
    graph = network.graph
    consts = graph.consts
    dense = [node.name for node in graph.nodes
             if node.op == "Conv2D" and node.inputs[1] in consts
             and np.shape(consts[node.inputs[1]])[:2] == (3, 3) and np.shape(consts[node.inputs[1]])[2] > 1]
    if len(dense) <= KEEP_BEFORE_LAST + 1:
        return dense
    return dense[:-KEEP_BEFORE_LAST - 1] + dense[-1:]


def _torchao():
    """torchao's x86 quantizer module and its prepare / convert steps. Importing the quantizer module registers
    its Inductor fusions (see the module's docstring). The package warns about its CUDA kernels on a CPU-only
    torch, and torch about an enum it registers, nothing this backend uses: held back."""
    loggers = [logging.getLogger(name) for name in ("torchao", "torch.utils._pytree")]
    levels = [log.level for log in loggers]
    for log in loggers:
        log.setLevel(logging.ERROR)
    try:
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    except ImportError as exc:
        raise RuntimeError("the int8 backend needs torchao (pip install torchao)") from exc
    finally:
        for log, level in zip(loggers, levels, strict=True):
            log.setLevel(level)
    return xiq, prepare_pt2e, convert_pt2e


def _quantizer(xiq, weight_keys: set[str]):
    class ChosenConvs(xiq.X86InductorQuantizer):
        """The default x86 recipe, for the convolutions whose weight buffer is in ``weight_keys`` only (the
        quantizer's own filters go by module, and an exported graph's convolutions are functional calls)."""

        def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
            config = xiq.get_default_x86_inductor_quantization_config()

            def chosen(nodes: list[torch.fx.Node]) -> bool:
                return any(n.target is torch.ops.aten.conv2d.default
                           and getattr(n.args[1], "target", None) in weight_keys for n in nodes)

            self._annotate_with_config(model, config, chosen)
            self._annotate_output_for_int8_in_int8_out_pattern_entry(model)
            return model

    return ChosenConvs()


def _name_convs(gm: torch.fx.GraphModule) -> None:
    """Give each convolution the source record the quantizer finds convolutions by (non-strict ``torch.export``
    leaves it out)."""
    for node in gm.graph.find_nodes(op="call_function", target=torch.ops.aten.conv2d.default):
        node.meta.setdefault("source_fn_stack", [(node.name, F.conv2d)])


def _mixed(gm: torch.fx.GraphModule, dtype: torch.dtype) -> None:
    """int8-mixed-``dtype``: each quantised convolution's dequantised input and weight (and bias) cast to
    ``dtype`` and its output back to float32, written as autocast writes it: the pattern torchao's passes fuse
    into one int8 convolution with a ``dtype`` output."""
    if dtype == torch.float32:
        return
    cast = torch.ops.prims.convert_element_type.default
    graph = gm.graph
    for node in list(graph.find_nodes(op="call_function", target=torch.ops.aten.conv2d.default)):
        if "dequantize" not in str(getattr(node.args[0], "target", "")):
            continue
        x, weight, *rest = node.args
        bias = rest[0] if rest else None
        with graph.inserting_before(node):
            x, weight = graph.call_function(cast, (x, dtype)), graph.call_function(cast, (weight, dtype))
            bias = graph.call_function(cast, (bias, dtype)) if bias is not None else None
        node.args = (x, weight, bias, *rest[1:])
        with graph.inserting_after(node):
            back = graph.call_function(cast, (node, torch.float32))
        node.replace_all_uses_with(back, delete_user_cb=lambda user, back=back: user is not back)
    graph.lint()
    gm.recompile()


def _calibration_input(x: Tensor, multiple: int, fixed: tuple[int, int] | None) -> Tensor:
    if fixed is not None:
        x = F.interpolate(x, size=fixed, mode="bilinear", align_corners=False)
    else:
        h, w = (max(graph_program.MIN_MULTIPLES * multiple, n // multiple * multiple) for n in x.shape[-2:])
        x = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False)
    return x.clamp(-1, 1).contiguous(memory_format=torch.channels_last)


def quantised_program(network, pictures: list[Tensor], fast: torch.dtype, fixed_shape: tuple[int, int] | None = None
                      ) -> tuple[torch.export.ExportedProgram, tuple[int, int] | None]:
    """The exported program with :func:`int8_convs` quantised (calibrated on ``pictures``, NCHW in [-1, 1]) and
    every other convolution in ``fast``; and the one size it runs at (None: every multiple)."""
    if not pictures:
        raise ValueError("int8 calibration needs at least one photo")
    chosen = int8_convs(network)
    if not chosen:
        raise RuntimeError("no dense 3x3 convolutions to quantise")
    xiq, prepare_pt2e, convert_pt2e = _torchao()
    module = graph_program.ExportableGraph(network, fast, graph_program.REWRITES, float_convs=chosen).eval()
    quantizer = _quantizer(xiq, module.weight_keys(chosen))
    program, fixed = graph_program.export(module, module.size_multiple, fixed_shape=fixed_shape)
    gm = program.module()
    _name_convs(gm)
    prepared = prepare_pt2e(gm, quantizer)
    with torch.no_grad():
        for x in pictures:
            prepared(_calibration_input(x, module.size_multiple, fixed))
    converted = convert_pt2e(prepared)
    _mixed(converted, fast)
    shapes = None if fixed else graph_program.dynamic_sizes(module.size_multiple)
    with torch.no_grad():
        example = graph_program.export_example(*fixed) if fixed else graph_program.export_example()
        return torch.export.export(converted, (example,), dynamic_shapes=shapes), fixed


def build_package(network, out: Path, pictures: list[Tensor], fast: torch.dtype,
                  fixed_shape: tuple[int, int] | None = None) -> int:
    """AOTInductor-compile the int8 form of a graph into a ``.pt2`` package at ``out``; returns its size multiple.
    Freezing is on: it is where the quantise → dequantise → convolution chains become oneDNN int8 calls."""
    if not has_int8_dot():
        raise RuntimeError("int8 needs int8 dot-product instructions (AVX512_VNNI, AVX-VNNI or AMX) to pay")
    program, fixed = quantised_program(network, pictures, fast, fixed_shape)
    configs: dict[str, Any] = {"freezing": True}
    if fixed:
        configs["aot_inductor.metadata"] = graph_program.fixed_size_metadata(fixed)
    compile_package(program, out, configs)
    if not quantised_in(out):
        raise RuntimeError("the int8 package calls no int8 convolution (torchao's fusions did not apply)")
    return network.size_multiple


def quantised_in(package: Path) -> int:
    """How many oneDNN int8 convolution calls a package's generated code makes."""
    import zipfile

    with zipfile.ZipFile(package) as z:
        return sum(z.read(n).decode(errors="replace").count(QCONV_CALL) for n in z.namelist()
                   if n.endswith("wrapper.cpp"))
