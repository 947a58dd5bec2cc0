"""ONNX models imported into the graph IR against ONNX Runtime running the ORIGINAL files, on real photos.

ONNX Runtime runs each file as shipped (float16 input and weights for the sketch and JP face models); ours runs the
imported graph in float32 through GraphModule. PSNR is over the [-1, 1] range (peak-to-peak 2), as on 8-bit images.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from anipaint.importers.onnx_graph import OnnxImportError, convert_graph, read_onnx
from anipaint.networks.graph_module import GraphModule
from anipaint.networks.ir import Graph
from anipaint.quality import psnr

ort = pytest.importorskip("onnxruntime")

MODELS = {
    "v3-cute": "animeganv3/AnimeGANv3_tiny_Cute.onnx",
    "v3-sketch": "animeganv3/AnimeGANv3_PortraitSketch_fp16.onnx",
    "v3-jp-face": "animeganv3/AnimeGANv3_JP_face_v1.0_fp16.onnx",
}
SIZES = [(256, 256), (320, 448)]  # (h, w); multiples of 16, which the raw files need under ONNX Runtime


@pytest.fixture(scope="module", params=sorted(MODELS))
def imported(request: pytest.FixtureRequest, sources: Path) -> tuple[str, Path, Graph, GraphModule]:
    path = sources / MODELS[request.param]
    graph = read_onnx(path)
    return request.param, path, graph, GraphModule(graph).eval()


def _photos(group_photo: Image.Image, astronaut: Image.Image, h: int, w: int) -> dict[str, np.ndarray]:
    return {name: (np.asarray(img.resize((w, h), Image.Resampling.BICUBIC), np.float32) / 127.5 - 1.0)[None]
            for name, img in (("group", group_photo), ("astronaut", astronaut))}


def _ours(module: GraphModule, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return module(torch.from_numpy(x).permute(0, 3, 1, 2)).permute(0, 2, 3, 1).numpy()




def test_matches_onnxruntime_on_photos(imported, group_photo: Image.Image, astronaut: Image.Image) -> None:
    style, path, _, module = imported
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    inp = session.get_inputs()[0]
    dtype = np.float16 if "float16" in inp.type else np.float32
    for h, w in SIZES:
        for name, x in _photos(group_photo, astronaut, h, w).items():
            ref = session.run(None, {inp.name: x.astype(dtype)})[0].astype(np.float32)
            ours = _ours(module, x)
            value = psnr(ours, ref, peak=2.0)
            print(f"{style} {name} {h}x{w}: GraphModule vs ONNX Runtime PSNR {value:.1f} dB")
            assert ours.shape == ref.shape and value >= 35.0, (name, h, w, value)


def test_translation_keeps_feature_maps_nhwc(imported) -> None:
    """tf2onnx's NCHW<->NHWC Transposes are absorbed: the IR transposes only small tensors (norm statistics,
    attention maps), never a full-size feature map, and no ONNX op names or float16 constants remain."""
    _, _, graph, module = imported
    assert not {n.op for n in graph.nodes} & {"Conv", "Pad", "Resize", "Upsample", "Gather", "Slice", "Unsqueeze"}
    assert all(v.dtype in (np.float32, np.int32) for v in graph.consts.values())
    sizes = {}
    x = torch.rand(1, 3, 128, 128) * 2 - 1
    wanted = [n.name for n in graph.nodes if n.op == "Transpose"]
    with torch.no_grad():
        for name, value in zip(wanted, module.execute(x, outputs=wanted or None), strict=False):
            sizes[name] = value.t.numel()
    assert all(n <= 128 * 128 * 128 // 16 for n in sizes.values()), sizes  # at most 1/16 of a 128-channel map
    assert Counter(n.op for n in graph.nodes)["Conv2D"] > 20


def test_any_size_and_flat_input(imported) -> None:
    _, _, _, module = imported
    with torch.no_grad():
        odd = module(torch.rand(1, 3, 101, 77) * 2 - 1)
        flat = module(torch.zeros(1, 3, 64, 96))
    assert odd.shape == (1, 3, 101, 77) and torch.isfinite(odd).all()
    assert flat.shape == (1, 3, 64, 96) and torch.isfinite(flat).all()


def test_converted_artefact_loads_and_runs(sources: Path, tmp_path: Path) -> None:
    facts = convert_graph([sources / MODELS["v3-sketch"]], tmp_path)
    assert facts["format"] == "onnx" and facts["size_multiple"] == 8 and facts["parameters"] > 1_000_000
    data = torch.load(tmp_path / "model.pt", map_location="cpu", weights_only=True)
    module = GraphModule(Graph.from_dict(data)).eval()
    with torch.no_grad():
        y = module(torch.rand(1, 3, 64, 64) * 2 - 1)
    assert y.shape == (1, 3, 64, 64) and float(y.abs().max()) <= 1.0


def test_rejects_a_file_that_is_not_onnx(tmp_path: Path) -> None:
    bad = tmp_path / "x.onnx"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(OnnxImportError, match="not an ONNX model"):
        read_onnx(bad)
