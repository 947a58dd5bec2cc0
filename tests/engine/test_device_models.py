"""The device models' graph rewrites (anipaint.engine.onnx.norms, .onnx_upsample): each norm chain becomes one
InstanceNormalization, each per-channel mean a GlobalAveragePool, each 2× upsampling one Resize, and the file
still paints what the server's float32 ONNX file paints."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from anipaint.engine.onnx.norms import fuse_instance_norms, pooled_means  # noqa: E402

C, EPS = 4, 1e-5


def _norm_graph(leak_centred: bool = False, divide: bool = False):
    """y = (a - mean a) / sqrt(mean((a - mean a)^2) + eps) * sqrt(var b + eps) + mean b, as the exporter writes
    AnimeGANv3's norms: times the root's Reciprocal (Hayao), or with ``divide`` a Div by it (Shinkai); with
    ``leak_centred`` the centred value is also a graph output."""
    axes = numpy_helper.from_array(np.array([2, 3], np.int64), "axes")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    eps = numpy_helper.from_array(np.array(EPS, np.float32), "eps")
    mean = lambda x, out: helper.make_node("ReduceMean", [x, "axes"], [out], keepdims=1)  # noqa: E731
    nodes = [
        mean("b", "mb"), helper.make_node("Sub", ["b", "mb"], ["cb"]), helper.make_node("Pow", ["cb", "two"], ["pb"]),
        mean("pb", "vb"), helper.make_node("Add", ["vb", "eps"], ["vbe"]), helper.make_node("Sqrt", ["vbe"], ["sb"]),
        mean("a", "ma"), helper.make_node("Sub", ["a", "ma"], ["ca"]), helper.make_node("Pow", ["ca", "two"], ["pa"]),
        mean("pa", "va"), helper.make_node("Add", ["va", "eps"], ["vae"]), helper.make_node("Sqrt", ["vae"], ["sa"]),
        *([helper.make_node("Div", ["ca", "sa"], ["na"])] if divide else
          [helper.make_node("Reciprocal", ["sa"], ["ra"]), helper.make_node("Mul", ["ca", "ra"], ["na"])]),
        helper.make_node("Mul", ["na", "sb"], ["scaled"]), helper.make_node("Add", ["scaled", "mb"], ["y"]),
    ]
    shape = [1, C, "h", "w"]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("a", "b")]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)]
    if leak_centred:
        outputs.append(helper.make_tensor_value_info("ca", TensorProto.FLOAT, shape))
    graph = helper.make_graph(nodes, "norm", inputs, outputs, [axes, two, eps])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _run(model, feed: dict) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feed)


def _ops(model) -> Counter:
    return Counter(node.op_type for node in model.graph.node)


@pytest.mark.parametrize("divide", [False, True], ids=["reciprocal", "div"])
def test_a_norm_chain_becomes_one_instance_normalization_with_the_same_output(divide) -> None:
    rng = np.random.default_rng(3)
    feed = {"a": rng.normal(2.0, 3.0, (1, C, 9, 13)).astype(np.float32),
            "b": rng.normal(-1.0, 0.5, (1, C, 9, 13)).astype(np.float32)}
    model = _norm_graph(divide=divide)
    (want,) = _run(model, feed)
    assert fuse_instance_norms(model) == 1
    assert pooled_means(model) == 3  # b's two means and its square
    onnx.checker.check_model(model)
    ops = _ops(model)
    assert ops["InstanceNormalization"] == 1 and ops["GlobalAveragePool"] == 2
    assert not {"ReduceMean", "Pow", "Reciprocal", "Div"} & set(ops)
    (got,) = _run(model, feed)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_chain_whose_centred_value_is_used_elsewhere_is_left_alone() -> None:
    model = _norm_graph(leak_centred=True)
    assert fuse_instance_norms(model) == 0
    assert _ops(model)["InstanceNormalization"] == 0


# v3-hayao's 13 norms rescale one activation by another's statistics (the chain above); v3-tiny's few norms
# divide by their spread without rescaling, so only their means become pools.
# Both upsample three times (v3-cute once more), each now one Resize of both axes (their only Slices were those).
@pytest.mark.parametrize("style_id, norms, resizes", [("v3-hayao", 13, 3), ("v3-cute", 0, 4)])
def test_the_device_model_has_single_norms_and_resizes_and_paints_as_the_float32_file(
        device_model, style_id, norms, resizes) -> None:
    """Against the server's float32 ONNX Runtime file, on real photos the check set never saw: ≥ 40 dB and at most
    0.01 % of pixels far off."""
    data = pytest.importorskip("skimage.data")
    from PIL import Image

    from anipaint.engine import backends, builds
    from anipaint.engine.onnx import device_models
    from anipaint.engine.runners import OrtBackend
    from anipaint.engine.tensors import from_tensor, to_tensor
    from anipaint.models import store
    from anipaint.models.registry import get_style
    from anipaint.quality import faithful, far_share, psnr
    from anipaint.settings import reload_settings

    settings = reload_settings()
    style = get_style(style_id)
    model = device_model(style_id)
    key = builds.cached_engine_key(store.artefact_path(style, settings))
    fp32 = backends.build_path(backends.PORTABLE, style, settings, key)
    device_file = device_models.path_of(model, style, settings)
    before, after = _ops(onnx.load(str(fp32))), _ops(onnx.load(str(device_file)))
    assert after["InstanceNormalization"] == norms and model.rewritten > 0
    # a fused chain takes two means with it; every other mean is now a pool
    assert after["InstanceNormalization"] * 2 + after["GlobalAveragePool"] == before["ReduceMean"] > 0
    assert not {"ReduceMean", "Pow"} & set(after)
    assert after["Resize"] == before["Resize"] + resizes and before["Slice"] > 0 == after["Slice"]
    want, got = OrtBackend(fp32, model.multiple), OrtBackend(device_file, model.multiple)
    for photo in (data.astronaut(), data.chelsea()):
        x = to_tensor(np.asarray(Image.fromarray(photo).resize((256, 256))))
        a, b = from_tensor(got(x)), from_tensor(want(x))
        assert faithful(psnr(a, b), far_share(a, b)), (psnr(a, b), far_share(a, b))


def _upsample_model(leak_midpoints: bool = False):
    """AnimeGANv3's 2× upsampling (TF1's asymmetric bilinear, graph_ops.resize_bilinear) exported as the device
    models' float32 files are (torch.export, symbolic H and W); with ``leak_midpoints`` a midpoint tensor is
    also a graph output."""
    import io

    import torch

    from anipaint.networks.graph_ops import resize_bilinear

    class Upsample(torch.nn.Module):
        def forward(self, x):
            return resize_bilinear(x * 1.0, (x.shape[-2] * 2, x.shape[-1] * 2))

    dims = {"x": {2: torch.export.Dim("h", min=3, max=512), 3: torch.export.Dim("w", min=3, max=512)}}
    program = torch.export.export(Upsample(), (torch.zeros(1, C, 6, 8),), dynamic_shapes=dims)
    buf = io.BytesIO()
    torch.onnx.export(program, dynamo=True, optimize=True).save(buf)
    model = onnx.load_from_string(buf.getvalue())
    if leak_midpoints:
        add = next(n for n in model.graph.node if n.op_type == "Add")
        model.graph.output.append(helper.make_tensor_value_info(add.output[0], TensorProto.FLOAT, None))
    return model


def test_an_exported_2x_upsampling_becomes_one_resize_with_the_same_output() -> None:
    from anipaint.engine.onnx.upsample import upsample_to_resize

    model = _upsample_model()
    x = np.random.default_rng(5).normal(0.0, 1.0, (1, C, 7, 5)).astype(np.float32)  # odd sizes: the clamped edge
    feed = {model.graph.input[0].name: x}
    (want,) = _run(model, feed)
    assert want.shape == (1, C, 14, 10)
    assert upsample_to_resize(model) == 2  # one chain per axis, merged into one 2-D Resize
    onnx.checker.check_model(model)
    ops = _ops(model)
    assert ops["Resize"] == 1 and not {"Slice", "Concat", "Unsqueeze", "Sub"} & set(ops), ops
    (got,) = _run(model, feed)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_an_upsampling_whose_midpoints_are_used_elsewhere_keeps_that_axis() -> None:
    from anipaint.engine.onnx.upsample import upsample_to_resize

    model = _upsample_model(leak_midpoints=True)
    x = np.random.default_rng(6).normal(0.0, 1.0, (1, C, 4, 6)).astype(np.float32)
    feed = {model.graph.input[0].name: x}
    want = _run(model, feed)
    assert upsample_to_resize(model) == 1
    got = _run(model, feed)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_asked_for_by_two_at_once_the_device_model_is_made_once(device_model, tmp_path, caplog) -> None:
    """``models prepare`` and a server's background warm-up (or two of a server's requests) may ask for a
    style's device model at the same time: one makes it, the other waits and reads it."""
    import logging
    import shutil
    from concurrent.futures import ThreadPoolExecutor

    from anipaint.engine.onnx import device_models
    from anipaint.models import store
    from anipaint.models.registry import get_style
    from anipaint.settings import Settings, reload_settings
    from support.builds import seed_builds
    from support.paths import SOURCES

    style = get_style("v3-cute")
    device_model("v3-cute")  # its builds, made once per run, are copied into a store of this test's own
    settings = Settings(home=tmp_path / "home", sources=SOURCES)
    artefact = store.artefact_path(style, settings)
    artefact.parent.mkdir(parents=True)
    shutil.copy2(store.artefact_path(style, reload_settings()), artefact)
    seed_builds("v3-cute", settings.home)
    caplog.clear()  # what was built for the session store above
    with caplog.at_level(logging.DEBUG, logger="anipaint.engine.builds"), ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda _: device_models.ensure(style, settings), range(2))
    made = [r.build_path for r in caplog.records if hasattr(r, "build_path")]
    assert first == second and made == [str(device_models.path_of(first, style, settings))], made
