"""The live camera's int8 model (anipaint.engine.onnx.live_models): quantised convolutions, the picture the float32
file paints, and served beside the device model for the page's live view."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


def test_the_live_model_is_int8_and_paints_what_the_float32_file_paints(device_model) -> None:
    """v3-hayao's live model: its convolutions in int8 (QDQ), ≥ 40 dB and at most 0.01 % of pixels far off against
    the server's float32 file on frames of a clip it was not calibrated on, at the live view's 256 × 192; offered in
    the device manifest at a URL the server answers, a picture taken while live still painted by the full model."""
    from anipaint.engine import backends, builds
    from anipaint.engine.onnx import live_models
    from anipaint.engine.runners import OrtBackend
    from anipaint.engine.tensors import from_tensor, to_tensor
    from anipaint.models import store
    from anipaint.models.registry import get_style
    from anipaint.quality import faithful, far_share, psnr
    from anipaint.service.routes.device import _find, manifest
    from anipaint.settings import reload_settings
    from support.paths import SAMPLES

    settings = reload_settings()
    style = get_style("v3-hayao")
    device = device_model("v3-hayao")
    live = live_models.ensure(style, settings)
    assert live.psnr is not None and live.far is not None and faithful(live.psnr, live.far), live
    if live.file is None:  # this machine's ONNX Runtime gains too little from int8: the device model paints live
        assert live.native_ratio > live_models.SPEEDUP
        pytest.skip(f"no live model made here: int8 ran at {live.native_ratio}× the float time")
    path = live_models.path_of(live, style, settings)
    ops = Counter(n.op_type for n in onnx.load(str(path)).graph.node)
    assert ops["Conv"] > 0 and ops["DequantizeLinear"] >= 2 * ops["Conv"], ops  # every Conv's input and weights

    key = builds.cached_engine_key(store.artefact_path(style, settings))
    want = OrtBackend(backends.build_path(backends.PORTABLE, style, settings, key), device.multiple)
    got = OrtBackend(path, device.multiple)
    import av
    from PIL import Image

    with av.open(str(SAMPLES / "dog_foliage.mp4")) as clip:
        frames = [f.to_image() for i, f in zip(range(31), clip.decode(video=0), strict=False) if i % 15 == 0]
    for frame in frames:
        x = to_tensor(np.asarray(frame.convert("RGB").resize((256, 192), Image.Resampling.BILINEAR)))
        a, b = from_tensor(got(x)), from_tensor(want(x))
        assert faithful(psnr(a, b), far_share(a, b)), (psnr(a, b), far_share(a, b))

    row = next(r for r in manifest(settings) if r["id"] == "v3-hayao")
    assert row["live"] == {"url": f"/device/models/{live.sha256}.onnx", "sha256": live.sha256, "bytes": live.bytes}
    assert row["sha256"] == device.sha256 != live.sha256  # the full model stays the style's own
    assert _find(settings, live.sha256) == path and live.bytes < device.bytes
