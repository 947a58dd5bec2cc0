"""Rows for the default style and its neighbours: v3-hayao, v3-shinkai and v1-hayao, every backend of each.

Each style's backends are timed end to end at 512 px in turns (a, b, c, a, b, c, …) with the runtimes
AnimeGANv3's own users run, in the same process and with the same threads:

* **ONNX Runtime**, float32, all graph optimisations: for v3-hayao the published ``AnimeGANv3_Hayao_36_fp16.onnx``
  with its weights widened to float32; for the others the style's eager network exported to ONNX at the
  picture's (padded) size;
* **LiteRT** (the TFLite interpreter) on the original ``.tflite`` where there is one and ``ai_edge_litert`` (a
  test-only dependency) is installed; the row is skipped otherwise.

The ratio is the anchor's time ÷ the row's (ONNX Runtime for the v3 styles, the ``strips`` backend for v1), PSNR
is against the style's eager network. Then faces on and off with the default style on the group photo.
"""

from __future__ import annotations

import importlib.util
import io
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from anipaint.cli.bench.faces_table import faces_rows
from anipaint.cli.bench.measure import Row, fmt, one_call_profile, pipeline, tensor_painter
from anipaint.engine.runtime import timing
from anipaint.networks.padding import pad_to_multiple

STYLES = ("v3-hayao", "v3-shinkai", "v1-hayao")
ANCHOR = {"v3-hayao": "onnxruntime", "v3-shinkai": "onnxruntime", "v1-hayao": "strips"}
ONNX_ORIGINAL = {"v3-hayao": "animeganv3/AnimeGANv3_Hayao_36_fp16.onnx"}
NOTES = {"onnxruntime": "ONNX Runtime fp32", "litert": "LiteRT, original .tflite, at its fixed 512² input"}
TFLITE_ORIGINAL = {"v3-hayao": "animeganv3/AnimeGANv3_Hayao_36_QUANTIZED_fp16.tflite"}


def widen_fp16(path: Path):
    """An fp16 ONNX model with its weights, casts and declared types widened to float32 (for ONNX Runtime on
    CPUs, which run fp16 graphs through casts)."""
    import onnx
    from onnx import TensorProto, numpy_helper

    model = onnx.load(str(path))
    graph = model.graph

    def wide(t):
        return numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name)

    for i, t in enumerate(graph.initializer):
        if t.data_type == TensorProto.FLOAT16:
            graph.initializer[i].CopyFrom(wide(t))
    for info in (*graph.input, *graph.output, *graph.value_info):
        if info.type.tensor_type.elem_type == TensorProto.FLOAT16:
            info.type.tensor_type.elem_type = TensorProto.FLOAT
    for node in graph.node:
        for a in node.attribute:
            if node.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT16:
                a.i = TensorProto.FLOAT
            elif a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT16:
                a.t.CopyFrom(wide(a.t))
    return model


class OrtAnchor:
    """ONNX Runtime on an ONNX model (bytes), NCHW tensors in and out; pads to the graph's size multiple."""

    def __init__(self, model: bytes, multiple: int, nhwc: bool) -> None:
        import onnxruntime as ort

        from anipaint.engine.runtime import threads

        self.session = ort.InferenceSession(model, threads.ort_options(), providers=["CPUExecutionProvider"])
        self.name = self.session.get_inputs()[0].name
        self.multiple, self.nhwc = multiple, nhwc

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        x = pad_to_multiple(x.float(), self.multiple, min_cells=2)
        arr = (x.permute(0, 2, 3, 1) if self.nhwc else x).contiguous().numpy()
        y = torch.from_numpy(self.session.run(None, {self.name: arr})[0])
        return (y.permute(0, 3, 1, 2) if self.nhwc else y)[..., :h, :w]


class LiteRtAnchor:
    """The LiteRT interpreter on the original ``.tflite``. The v3 files' reshapes are fixed at their declared
    input size (512×512), so the picture is padded to that size, as AnimeGANv3's own demo feeds it."""

    def __init__(self, path: Path, threads: int) -> None:
        from ai_edge_litert.interpreter import Interpreter

        self.interpreter = Interpreter(model_path=str(path), num_threads=threads)
        self.interpreter.allocate_tensors()
        self.input = self.interpreter.get_input_details()[0]
        self.size = tuple(int(s) for s in self.input["shape"][1:3])

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        if h > self.size[0] or w > self.size[1]:
            raise ValueError(f"LiteRT anchor: {h}×{w} does not fit the file's fixed {self.size} input")
        x = F.pad(x.float(), (0, self.size[1] - w, 0, self.size[0] - h), mode="replicate")
        it = self.interpreter
        it.set_tensor(self.input["index"], x.permute(0, 2, 3, 1).contiguous().numpy())
        it.invoke()
        y = it.get_tensor(it.get_output_details()[0]["index"])
        return torch.from_numpy(y).permute(0, 3, 1, 2)[..., :h, :w]


def _exported_onnx(network, side_hw: tuple[int, int]) -> tuple[bytes, int]:
    """The style's eager network exported to ONNX (float32) at one padded size; (model bytes, multiple)."""
    from anipaint.engine.compile.graph_program import for_network

    module, multiple = for_network(network)
    h, w = (-(-s // multiple) * multiple for s in side_hw)
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module, (torch.zeros(1, 3, h, w),), buf, dynamo=False, input_names=["x"],
                          output_names=["y"], opset_version=17)
    return buf.getvalue(), multiple


def anchors(style_id: str, network, settings, work_hw: tuple[int, int]) -> dict[str, Callable]:
    from anipaint.engine.runtime import threads

    multiple = network.size_multiple
    out: dict[str, Callable] = {}
    if style_id in ONNX_ORIGINAL:
        model = widen_fp16(Path(settings.sources) / ONNX_ORIGINAL[style_id]).SerializeToString()
        out["onnxruntime"] = OrtAnchor(model, multiple, nhwc=True)
    else:
        model, multiple = _exported_onnx(network, work_hw)
        out["onnxruntime"] = OrtAnchor(model, multiple, nhwc=False)
    tflite = TFLITE_ORIGINAL.get(style_id)
    if tflite and importlib.util.find_spec("ai_edge_litert") is not None:
        out["litert"] = LiteRtAnchor(Path(settings.sources) / tflite, threads.current())
    return out


def style_rows(settings, photo: bytes, rounds: int) -> tuple[list[Row], dict]:
    """Rows for :data:`STYLES`, faces on/off and portrait mode; also each style's auto record (build, measuring)."""
    from anipaint import imaging, preprocess
    from anipaint.engine import backends, build_backends, load_network
    from anipaint.models import store
    from anipaint.models.registry import get_style
    from anipaint.quality import psnr

    rows: list[Row] = []
    records: dict[str, dict] = {}
    work_hw = preprocess.to_work_image(imaging.load_image(photo), 512).rgb.shape[:2]
    for style_id in STYLES:
        style = get_style(style_id)
        if store.convert([style_id], settings).get(style_id) != "ok":
            rows.append(Row(style_id, float("nan"), note="not available here"))
            continue
        artefact = store.artefact_path(style, settings)
        print(f"building/measuring backends for {style_id} …", file=sys.stderr, flush=True)
        records[style_id] = build_backends(style, artefact, settings, "auto")
        network = load_network(style, artefact)
        painters = {name: backends.open_named(name, style, artefact, settings, network)
                    for name in backends.applicable(style)}
        painters.update(anchors(style_id, network, settings, work_hw))
        runs = {name: pipeline(photo, tensor_painter(fn)) for name, fn in painters.items()}
        pictures = {name: run() for name, run in runs.items()}  # warm-up, and the pictures for PSNR
        times = timing.alternate(runs, rounds=rounds)
        anchor = times[ANCHOR[style_id]].seconds
        choice = records[style_id]["choice"]
        for name, t in times.items():
            cpu, rss = one_call_profile(runs[name])
            label = f"{style_id}: {name}" + (" (auto's choice)" if name == choice else "")
            note = NOTES.get(name, "")
            rows.append(Row(label, t.seconds, anchor / t.seconds, cpu, rss, psnr(pictures[name], pictures["torch"]),
                            t.foreign, note))
            print(fmt([rows[-1]]).splitlines()[-1], file=sys.stderr, flush=True)
    rows += faces_rows(settings, photo, rounds)
    return rows, records
