"""CartoonGAN light (TF2 SavedModels) imported without TensorFlow, against TensorFlow running the folders.

TensorFlow (test-only) loads each SavedModel and runs its serving signature in a subprocess
(tests/support/tf_reference.py); ours reads saved_model.pb and the variables bundle, inlines the function library and
runs the graph with torch.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from anipaint.importers.savedmodel import SavedModelImportError, convert, read_bundle, read_saved_model
from anipaint.networks.graph_module import GraphModule
from anipaint.quality import psnr

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"cartoongan-shinkai": "cartoongan/light_shinkai_SavedModel",
           "cartoongan-paprika": "cartoongan/light_paprika_SavedModel"}
SIZES = [(256, 256), (320, 448)]
needs_tf = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="tensorflow not installed")


def _photos(group_photo: Image.Image, astronaut: Image.Image) -> dict[str, np.ndarray]:
    out = {}
    for h, w in SIZES:
        for name, img in (("group", group_photo), ("astronaut", astronaut)):
            arr = np.asarray(img.convert("RGB").resize((w, h), Image.Resampling.BICUBIC), np.float32)
            out[f"{name}_{h}x{w}"] = (arr / 127.5 - 1.0)[None]
    return out




@pytest.fixture(scope="module", params=sorted(FOLDERS))
def converted(request: pytest.FixtureRequest, sources: Path, tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[str, Path, GraphModule]:
    folder = sources / FOLDERS[request.param]
    out = tmp_path_factory.mktemp(request.param)
    facts = convert([folder / "saved_model.pb"], out)
    assert facts["variables"] == 126 and facts["parameters"] > 800_000
    return request.param, folder, GraphModule.from_file(out / "model.pt").eval()


def test_matches_tensorflow_on_photos(converted, group_photo: Image.Image, astronaut: Image.Image,
                                      original_outputs) -> None:
    style, folder, module = converted
    inputs = _photos(group_photo, astronaut)
    ref = original_outputs("savedmodel", folder, inputs)
    for key, x in inputs.items():
        with torch.no_grad():
            ours = module(torch.from_numpy(x).permute(0, 3, 1, 2)).permute(0, 2, 3, 1).numpy()
        value = psnr(ours, ref[key], peak=2.0)
        print(f"{style} {key}: GraphModule vs TensorFlow PSNR {value:.1f} dB")
        assert ours.shape == ref[key].shape and value >= 35.0, (key, value)


def test_any_size(converted) -> None:
    _, _, module = converted
    with torch.no_grad():
        y = module(torch.rand(1, 3, 101, 77) * 2 - 1)
    assert y.shape == (1, 3, 101, 77) and torch.isfinite(y).all() and float(y.abs().max()) <= 1.0


def test_bundle_reader(sources: Path) -> None:
    """Every variable of the bundle: 126 float tensors, conv kernels HWIO, summing to the network's size."""
    values = read_bundle(sources / FOLDERS["cartoongan-shinkai"] / "variables")
    weights = {k: v for k, v in values.items() if k.endswith("VARIABLE_VALUE")}
    assert len(weights) == 126 and all(v.dtype == np.float32 for v in weights.values())
    kernels = [v for k, v in weights.items() if k.endswith("kernel/.ATTRIBUTES/VARIABLE_VALUE") and v.ndim == 4]
    assert kernels and all(k.shape[0] == k.shape[1] for k in kernels)  # square spatial kernels first: HWIO
    graph = read_saved_model(sources / FOLDERS["cartoongan-shinkai"])
    assert graph.parameter_count() >= sum(v.size for v in weights.values())


def test_rejects_a_folder_without_a_saved_model(tmp_path: Path) -> None:
    (tmp_path / "saved_model.pb").write_bytes(b"\x12\x03abc")
    with pytest.raises(SavedModelImportError, match="not a SavedModel"):
        read_saved_model(tmp_path)
