"""Person segmentation (MediaPipe selfie segmentation): RGB picture -> person probability.

The model is the original TFLite file imported into the graph IR (``helpers.install_segmenter``) and run by
:class:`~anipaint.networks.graph_module.GraphModule`, like the styles. It takes a 256x256 RGB picture in [0, 1];
:func:`load_segmenter` returns a callable that resizes any picture to that, runs the network and gives the
probability map at the model's input size (callers scale it to what they need).
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

INPUT_SIDE = 256  # the model's input: 256 x 256 RGB

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


@lru_cache(maxsize=2)
def _segmenter(path: Path, mtime_ns: int) -> Segmenter:
    module = GraphModule.from_file(path).eval()

    def segment(rgb: np.ndarray) -> np.ndarray:
        if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
            raise ValueError(f"expected an RGB uint8 picture (H, W, 3), got {rgb.dtype} {rgb.shape}")
        small = Image.fromarray(rgb).resize((INPUT_SIDE, INPUT_SIDE), Image.Resampling.BILINEAR)
        x = torch.from_numpy(np.asarray(small, np.float32) / 255.0).permute(2, 0, 1)[None]
        with torch.inference_mode():
            prob = module(x)
        return prob[0, 0].clamp(0.0, 1.0).numpy()

    return segment
