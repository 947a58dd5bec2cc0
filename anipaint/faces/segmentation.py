"""Person segmentation (MediaPipe selfie segmentation): RGB picture -> person probability.

The model is the original TFLite file imported into the graph IR (``helpers.install_segmenter``). It takes a
256x256 RGB picture in [0, 1]; :func:`load_segmenter` returns a callable that resizes any picture to that, runs
the network and gives the probability map at the model's input size (callers scale it to what they need).

The network runs in ONNX Runtime on its graph traced once at that one size beside the artefact
(:func:`~anipaint.models.helpers.segmenter_onnx`, ~3 s, by ``anipaint models prepare`` or on first use): 2.4x
faster a crop than the eager graph, the same map to ~3e-5 (docs/benchmarks.md). Where ONNX Runtime or the export
is not available it runs eagerly (:class:`~anipaint.networks.graph_module.GraphModule`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from anipaint.errors import ModelStoreError
from anipaint.models import helpers
from anipaint.networks.graph_module import GraphModule
from anipaint.settings import Settings

INPUT_SIDE = helpers.SEGMENTER_SIDE  # the model's input: 256 x 256 RGB

Segmenter = Callable[[np.ndarray], np.ndarray]


def load_segmenter(settings: Settings | None = None) -> Segmenter:
    """A callable RGB uint8 (H, W, 3) -> person probability float32 (256, 256) in [0, 1], thread-safe.

    Raises :class:`~anipaint.errors.ModelStoreError` when the segmenter's source file is not available here.
    """
    path = helpers.install_segmenter(settings)
    if path is None:
        raise ModelStoreError("person segmenter not available: segmentation/selfie_segmentation.tflite is missing "
                              "from the sources folder (`anipaint models fetch` downloads it)")
    return _segmenter(path, path.stat().st_mtime_ns)  # a rebuilt artefact is loaded again


def _runner(path: Path) -> Callable[[torch.Tensor], np.ndarray]:
    """The network: ONNX Runtime on :func:`onnx_path`'s graph, else the eager graph."""
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    graph = helpers.segmenter_onnx(path) if ort is not None else None
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
