"""The person segmenter as portrait mode and the background style run it: ONNX Runtime on the graph exported
beside the store's artefact, checked against the eager graph it was traced from."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from anipaint.faces import segmentation
from anipaint.models import helpers
from anipaint.networks.graph_module import GraphModule
from anipaint.settings import get_settings

pytest.importorskip("onnxruntime")


def test_segmenter_runs_its_onnx_graph_and_gives_the_eager_map(sources, group_photo, astronaut) -> None:
    settings = get_settings()
    path = helpers.install_segmenter(settings)
    if path is None:
        pytest.skip("segmenter source missing")
    segment = segmentation.load_segmenter(settings)
    assert (path.parent / helpers.SEGMENTER_ONNX).is_file()  # exported on first use, beside the artefact
    eager = GraphModule.from_file(path).eval()
    for img in (group_photo, astronaut):
        rgb = np.asarray(img.convert("RGB"))
        small = np.asarray(img.convert("RGB").resize((256, 256), Image.Resampling.BILINEAR), np.float32) / 255.0
        with torch.inference_mode():
            want = eager(torch.from_numpy(small).permute(2, 0, 1)[None])[0, 0].clamp(0, 1).numpy()
        got = segment(rgb)
        assert got.shape == (256, 256) and got.dtype == np.float32
        assert np.abs(got - want).max() < 1e-4
