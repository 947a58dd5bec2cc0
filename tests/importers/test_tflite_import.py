"""The TFLite reader: op translation, dequantization, size-independent rewrites, and the graph artefact.

The v3 Hayao file is float (fp16 weights), so the imported graph run by GraphModule must reproduce the
LiteRT interpreter closely; ``experimental_preserve_all_tensors`` makes LiteRT use its reference kernels
(XNNPACK's fp16 path alone drifts ~6 % from them).
"""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from anipaint.importers.tflite import TFLiteImportError, convert_graph, read_tflite
from anipaint.networks.graph_module import GraphModule
from anipaint.networks.ir import Graph

V2 = "animeganv2/animeganv2_hayao_256x256_integer_quant.tflite"
V3 = "animeganv3/AnimeGANv3_Hayao_36_QUANTIZED_fp16.tflite"


@pytest.fixture(scope="module")
def v2_graph(sources: Path) -> Graph:
    return read_tflite(sources / V2)


@pytest.fixture(scope="module")
def v3_graph(sources: Path) -> Graph:
    return read_tflite(sources / V3)


def _photo(img: Image.Image, w: int, h: int) -> np.ndarray:
    return np.asarray(img.resize((w, h), Image.LANCZOS), np.float32) / 127.5 - 1.0


def test_v2_translation(v2_graph: Graph) -> None:
    ops = Counter(n.op for n in v2_graph.nodes)
    assert ops["Conv2D"] == 21 and ops["DepthwiseConv2dNative"] == 4 and ops["BiasAdd"] == 4
    assert ops["MirrorPad"] == 16 and ops["LeakyRelu"] == 20 and ops["ResizeBilinear"] == 2
    assert ops["Identity"] == 73 + 49  # every activation DEQUANTIZE/QUANTIZE (no constant ones here)
    assert not [n for n in v2_graph.nodes if n.op.isupper()]  # no TFLite op names left
    first = v2_graph.node("generator/G_MODEL/A/Conv/Conv2D1")
    assert v2_graph.consts[first.inputs[1]].shape == (7, 7, 3, 32)  # HWIO
    dw = next(n for n in v2_graph.nodes if n.op == "DepthwiseConv2dNative")
    assert v2_graph.consts[dw.inputs[1]].shape == (3, 3, 256, 1)  # [H, W, C, M]
    eps = v2_graph.consts["generator/G_MODEL/E/LayerNorm_2/batchnorm/add/y"]
    assert eps.shape == () and eps == pytest.approx(1e-12, rel=1e-3)
    for n in v2_graph.nodes:
        if n.op == "ResizeBilinear":
            assert n.attrs == {"align_corners": False, "half_pixel_centers": False}
            assert n.inputs[1] not in v2_graph.consts  # rewritten to 2 * Shape(x)[1:3]
    assert v2_graph.parameter_count() == 2_143_552 + 1  # the network's parameters + the epsilon scalar
    assert v2_graph.meta["size_multiple"] == 4 and v2_graph.meta["input_shape"] == [1, 256, 256, 3]


def test_v2_graph_equals_network(v2_graph: Graph, group_photo: Image.Image) -> None:
    """The same file through the IR executor and through the named network (convert_v2) gives one result."""
    from anipaint.importers.tflite_v2 import v2_state_dict
    from anipaint.networks.animeganv2 import Generator

    net = Generator()
    net.load_state_dict(v2_state_dict(v2_graph)[0], strict=True)
    x = torch.from_numpy(_photo(group_photo, 300, 260)).permute(2, 0, 1)[None]
    with torch.no_grad():
        a, b = GraphModule(v2_graph).eval()(x), net.eval()(x)
    assert a.shape == b.shape == x.shape
    torch.testing.assert_close(a, b, rtol=0, atol=1e-4)


def test_v3_rewrites_make_graph_size_free(v3_graph: Graph) -> None:
    for n in v3_graph.nodes:
        if n.op in ("Reshape", "ResizeBilinear"):
            assert n.inputs[1] not in v3_graph.consts, f"{n.name} still has a constant shape"
    rewrites = Counter(r["op"] for r in v3_graph.meta["rewrites"])
    assert rewrites == {"Reshape": 4, "ResizeBilinear": 3}
    assert v3_graph.meta["fixed_size_ops"] == []
    assert v3_graph.meta["size_multiple"] == 8
    # the fp16 export flushed the norms' 1e-5 (26 adds) and the attention's 1e-9 to zero; they are restored
    assert Counter(r["now"] for r in v3_graph.meta["repairs"]) == {1e-5: 26, 1e-9: 1}


def test_v3_graph_matches_interpreter(sources: Path, v3_graph: Graph, group_photo: Image.Image) -> None:
    litert = pytest.importorskip("ai_edge_litert.interpreter")
    x = _photo(group_photo, 512, 512)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = litert.Interpreter(model_path=str(sources / V3), experimental_preserve_all_tensors=True,
                                num_threads=2)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x[None])
    it.invoke()
    details = {d["name"]: d["index"] for d in it.get_tensor_details()}
    names = ["generator_1/main/External_attention/Reshape_1", v3_graph.outputs[0]]  # after the attention; output
    with torch.no_grad():
        values = GraphModule(v3_graph).eval().execute(torch.from_numpy(x).permute(2, 0, 1)[None], outputs=names)
    for name, value in zip(names, values, strict=True):
        ref = it.get_tensor(details[name])
        ours = value.nhwc().numpy()
        assert ours.shape == ref.shape
        err = float(np.sqrt(np.mean((ours - ref) ** 2)) / np.sqrt(np.mean(ref**2)))
        # measured 1.4e-4 (attention) and 3.3e-4 (output); 7e-5 without the restored epsilons (LiteRT has 0)
        assert err < 1e-3, f"{name}: rel. RMSE {err:.2e}"


def test_v3_graph_runs_at_other_sizes_and_batches(v3_graph: Graph) -> None:
    module = GraphModule(v3_graph).eval()
    x = torch.rand(2, 3, 136, 200) * 2 - 1
    with torch.no_grad():
        y, single = module(x), module(x[1:])
        odd = module(torch.rand(1, 3, 101, 77) * 2 - 1)
    assert y.shape == x.shape and odd.shape == (1, 3, 101, 77)
    torch.testing.assert_close(y[1:], single, rtol=1e-4, atol=1e-4)


def test_convert_graph_artefact(sources: Path, tmp_path: Path) -> None:
    facts = convert_graph([sources / V3], tmp_path)
    data = torch.load(tmp_path / "model.pt", map_location="cpu", weights_only=True)
    graph = Graph.from_dict(data)
    assert facts["parameters"] == graph.parameter_count() > 1_000_000
    assert graph.meta["source_format"] == "tflite" and facts["size_multiple"] == 8
    with torch.no_grad():
        # a flat picture: NaN in the file as shipped (epsilon 0), finite with the restored epsilons
        y = GraphModule.from_file(tmp_path / "model.pt")(torch.zeros(1, 3, 64, 64))
    assert y.shape == (1, 3, 64, 64) and torch.isfinite(y).all()


def test_rejects_non_tflite(tmp_path: Path) -> None:
    bad = tmp_path / "x.tflite"
    bad.write_bytes(b"\0" * 64)
    with pytest.raises(TFLiteImportError, match="not a TFLite"):
        read_tflite(bad)
