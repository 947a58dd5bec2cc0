"""White-box cartoon and the selfie segmenter, imported from TFLite, against the LiteRT interpreter on real photos.

White-box's file is a dynamic-range model (int8 weights, float activations). Its output is not the raw generator:
the file already applies the original project's guided filter (radius 1, eps 5e-3, guide: the input photo) to the
generator's last convolution; checked here against the guided filter written out in NumPy on LiteRT's own
generator tensor. What the original does after that, the clip to [-1, 1], the importer appends. The LiteRT
interpreter cannot resize either file (constant RESIZE_BILINEAR sizes), so it runs at the files' own sizes; our
graphs also run at other sizes.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from anipaint.importers.tflite import convert_whitebox, read_tflite
from anipaint.networks.graph_module import GraphModule
from anipaint.networks.ir import Graph
from anipaint.quality import psnr

litert = pytest.importorskip("ai_edge_litert.interpreter")

WHITEBOX = "whitebox/whitebox_cartoon_gan_dr.tflite"
SEGMENTER = "segmentation/selfie_segmentation.tflite"


def _litert(path: Path, x: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = litert.Interpreter(model_path=str(path), num_threads=2)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x.astype(np.float32))
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]).copy()


def _box_mean(a: np.ndarray, r: int) -> np.ndarray:
    """Mean over the (2r+1)² window, zero padding, divided by the number of window pixels inside the picture."""
    h, w = a.shape[:2]
    padded = np.pad(a, ((r, r), (r, r), (0, 0)))
    ones = np.pad(np.ones((h, w, 1)), ((r, r), (r, r), (0, 0)))
    total, count = np.zeros_like(a), np.zeros((h, w, 1))
    for dy in range(2 * r + 1):
        for dx in range(2 * r + 1):
            total += padded[dy : dy + h, dx : dx + w]
            count += ones[dy : dy + h, dx : dx + w]
    return total / count


def _guided_filter(guide: np.ndarray, y: np.ndarray, r: int = 1, eps: float = 5e-3) -> np.ndarray:
    mean_x, mean_y = _box_mean(guide, r), _box_mean(y, r)
    a = (_box_mean(guide * y, r) - mean_x * mean_y) / (_box_mean(guide * guide, r) - mean_x**2 + eps)
    b = mean_y - a * mean_x
    return _box_mean(a, r) * guide + _box_mean(b, r)


def _ours(module: GraphModule, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return module(torch.from_numpy(x).permute(0, 3, 1, 2)).permute(0, 2, 3, 1).numpy()




def _photo(img: Image.Image, w: int, h: int, lo: float, hi: float) -> np.ndarray:
    arr = np.asarray(img.convert("RGB").resize((w, h), Image.Resampling.BICUBIC), np.float32) / 255.0
    return (arr * (hi - lo) + lo)[None]


@pytest.fixture(scope="module")
def whitebox(sources: Path, tmp_path_factory: pytest.TempPathFactory) -> GraphModule:
    out = tmp_path_factory.mktemp("whitebox")
    facts = convert_whitebox([sources / WHITEBOX], out)
    assert facts["passes"][-2:] == ["live_input_sized_ones", "append_clip"] and facts["fixed_size_ops"] == []
    return GraphModule.from_file(out / "model.pt").eval()


def test_whitebox_file_applies_the_guided_filter_itself(sources: Path, group_photo: Image.Image) -> None:
    x = _photo(group_photo, 512, 512, -1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = litert.Interpreter(model_path=str(sources / WHITEBOX), num_threads=2,
                                experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    generator = next(d["index"] for d in it.get_tensor_details()  # the generator's last conv, before the filter
                     if d["name"].startswith("generator/Conv_9/BiasAdd") and list(d["shape"]) == [1, 512, 512, 3])
    raw, out = it.get_tensor(generator)[0], it.get_tensor(it.get_output_details()[0]["index"])[0]
    filtered = _guided_filter(x[0].astype(np.float64), raw.astype(np.float64))
    assert psnr(out, filtered, 2.0) > 100.0 and psnr(out, raw, 2.0) < 25.0
    assert out.min() < -1.0 or out.max() > 1.0  # not clipped yet


def test_whitebox_matches_litert(sources: Path, whitebox: GraphModule, group_photo: Image.Image,
                                 astronaut: Image.Image) -> None:
    # the file's own size, whole photos; and a 512 crop of the group photo at its native 900 px scale
    pictures = {"group": _photo(group_photo, 512, 512, -1, 1), "astronaut": _photo(astronaut, 512, 512, -1, 1),
                "group_crop": _photo(group_photo.crop((194, 0, 706, 512)), 512, 512, -1, 1)}
    for name, x in pictures.items():
        ref = np.clip(_litert(sources / WHITEBOX, x)[0], -1, 1)
        ours = _ours(whitebox, x)[0]
        value = psnr(ours, ref, 2.0)
        print(f"whitebox {name} 512x512: GraphModule vs LiteRT (clipped) PSNR {value:.1f} dB")
        assert value >= 35.0, (name, value)
        assert ours.min() >= -1.0 and ours.max() <= 1.0


def test_whitebox_paints_any_size(whitebox: GraphModule, group_photo: Image.Image) -> None:
    """Fully convolutional: 384x640 and an odd size run; the 384x640 picture resembles the 512x512 one."""
    y = _ours(whitebox, _photo(group_photo, 640, 384, -1, 1))[0]
    odd = _ours(whitebox, _photo(group_photo, 203, 151, -1, 1))[0]
    assert y.shape == (384, 640, 3) and odd.shape == (151, 203, 3) and np.isfinite(odd).all()
    square = _ours(whitebox, _photo(group_photo, 512, 512, -1, 1))[0]
    resized = np.asarray(Image.fromarray(((square + 1) * 127.5).round().astype(np.uint8))
                         .resize((640, 384), Image.Resampling.BICUBIC), np.float32) / 127.5 - 1
    value = psnr(y, resized, 2.0)
    print(f"whitebox 384x640 vs own 512x512 output resized: PSNR {value:.1f} dB (loose)")
    assert value >= 22.0


@pytest.fixture(scope="module")
def segmenter_graph(sources: Path) -> Graph:
    return read_tflite(sources / SEGMENTER)


def test_segmenter_matches_litert(sources: Path, segmenter_graph: Graph, group_photo: Image.Image,
                                  astronaut: Image.Image) -> None:
    assert "CUSTOM:Convolution2DTransposeBias" in segmenter_graph.meta["tflite_ops"]
    module = GraphModule(segmenter_graph).eval()
    for name, img in (("group", group_photo), ("astronaut", astronaut)):
        x = _photo(img, 256, 256, 0, 1)
        ref, ours = _litert(sources / SEGMENTER, x), _ours(module, x)
        value = psnr(ours, ref, 1.0)
        print(f"segmenter {name} 256x256: GraphModule vs LiteRT PSNR {value:.1f} dB")
        assert ours.shape == ref.shape == (1, 256, 256, 1) and value >= 35.0, (name, value)
    with torch.no_grad():  # other sizes run too (global average pools, live upsampling sizes)
        other = module(torch.rand(1, 3, 192, 320))
    assert other.shape == (1, 1, 192, 320)


def test_load_segmenter_through_the_store(sources: Path, group_photo: Image.Image, astronaut: Image.Image) -> None:
    """The store converts the segmenter once; the loader takes RGB uint8 of any size and finds the people."""
    from anipaint.faces.segmentation import load_segmenter
    from anipaint.models import helpers
    from anipaint.settings import reload_settings

    settings = reload_settings()
    first = helpers.install_segmenter(settings)
    assert first is not None and helpers.install_segmenter(settings) == first
    segment = load_segmenter(settings)
    for name, img in (("group", group_photo), ("astronaut", astronaut)):
        rgb = np.asarray(img.convert("RGB"))
        prob = segment(rgb)
        x = (np.asarray(img.convert("RGB").resize((256, 256), Image.Resampling.BILINEAR), np.float32) / 255)[None]
        value = psnr(prob, _litert(sources / SEGMENTER, x)[0, :, :, 0], 1.0)
        print(f"load_segmenter {name} {rgb.shape[1]}x{rgb.shape[0]}: vs LiteRT on the same 256x256 input "
              f"PSNR {value:.1f} dB")
        assert prob.shape == (256, 256) and prob.dtype == np.float32 and value >= 35.0
    group = segment(np.asarray(group_photo))
    assert group[150:250, 100:156].mean() > 0.8  # the middle man's tie and shirt
    assert group[:12, :].mean() < 0.2  # the wall above the heads
