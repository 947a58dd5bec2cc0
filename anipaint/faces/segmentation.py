"""Person segmentation (MediaPipe selfie segmentation): RGB picture -> person probability.

The model is the original TFLite file imported into the graph IR (``helpers.install_segmenter``). It takes a
256x256 RGB picture in [0, 1]; :func:`load_segmenter` returns a callable that resizes any picture to that, runs
the network and gives the probability map at the model's input size (callers scale it to what they need).

The network runs in ONNX Runtime: its graph traced once at that one size into ``model.onnx`` beside the artefact
(a few seconds, on first use), which paints a crop in a fraction of the eager graph's time (docs/benchmarks.md)
and gives the same map to ~1e-7. Where ONNX Runtime or the export is not available it runs eagerly
(:class:`~anipaint.networks.graph_module.GraphModule`). The graph's shapes are constants of its one input size, so
``torch.export`` cannot trace it; the TorchScript tracer reads them as the constants they are.
"""

from __future__ import annotations

import logging
import os
import tempfile
import warnings
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from filelock import FileLock
from PIL import Image

from anipaint.errors import ModelStoreError
from anipaint.models import helpers
from anipaint.networks.graph_module import GraphModule
from anipaint.settings import Settings

INPUT_SIDE = 256  # the model's input: 256 x 256 RGB
ONNX_NAME = "model.onnx"

Segmenter = Callable[[np.ndarray], np.ndarray]
log = logging.getLogger("anipaint.faces")


def load_segmenter(settings: Settings | None = None) -> Segmenter:
    """A callable RGB uint8 (H, W, 3) -> person probability float32 (256, 256) in [0, 1], thread-safe.

    Raises :class:`~anipaint.errors.ModelStoreError` when the segmenter's source file is not available here.
    """
    path = helpers.install_segmenter(settings)
    if path is None:
        raise ModelStoreError("person segmenter not available: segmentation/selfie_segmentation.tflite is missing "
                              "from the sources folder (`anipaint models fetch` downloads it)")
    return _segmenter(path, path.stat().st_mtime_ns)  # a rebuilt artefact is loaded again


def onnx_path(path: Path) -> Path | None:
    """The segmenter's ONNX graph beside its artefact ``path``, exported now if missing; None where it can't be."""
    out = path.with_name(ONNX_NAME)
    if out.is_file():
        return out
    try:
        with FileLock(str(out) + ".lock"):
            if not out.is_file():
                _export(GraphModule.from_file(path).eval(), out)
    except Exception as exc:  # noqa: BLE001 - the eager graph paints the same map
        log.warning("the person segmenter runs eagerly: its ONNX export failed (%s)", exc)
        return None
    return out


def _export(module: GraphModule, out: Path) -> None:
    fd, tmp = tempfile.mkstemp(suffix=".onnx", dir=out.parent)
    os.close(fd)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the tracer's notes on the shape values it reads as constants
            torch.onnx.export(module, (torch.zeros(1, 3, INPUT_SIDE, INPUT_SIDE),), tmp, dynamo=False,
                              input_names=["x"], output_names=["person"])
        os.replace(tmp, out)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _runner(path: Path) -> Callable[[torch.Tensor], np.ndarray]:
    """The network: ONNX Runtime on :func:`onnx_path`'s graph, else the eager graph."""
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    graph = onnx_path(path) if ort is not None else None
    if graph is None:
        module = GraphModule.from_file(path).eval()

        def eager(x: torch.Tensor) -> np.ndarray:
            with torch.inference_mode():
                return module(x)[0, 0].numpy()

        return eager
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = max(1, torch.get_num_threads())  # the painter's threads
    opts.inter_op_num_threads = 1
    session = ort.InferenceSession(str(graph), opts, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return lambda x: session.run(None, {name: x.numpy()})[0][0, 0]


@lru_cache(maxsize=2)
def _segmenter(path: Path, mtime_ns: int) -> Segmenter:
    run = _runner(path)

    def segment(rgb: np.ndarray) -> np.ndarray:
        if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
            raise ValueError(f"expected an RGB uint8 picture (H, W, 3), got {rgb.dtype} {rgb.shape}")
        small = Image.fromarray(rgb).resize((INPUT_SIDE, INPUT_SIDE), Image.Resampling.BILINEAR)
        x = torch.from_numpy(np.asarray(small, np.float32) / 255.0).permute(2, 0, 1)[None].contiguous()
        return np.clip(run(x), 0.0, 1.0)

    return segment
