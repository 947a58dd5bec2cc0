"""bfloat16 convolutions, as ``compiled`` builds them for the graph styles and v1 on CPUs that multiply bf16
natively (AVX512_BF16, AMX), stay faithful to each style's eager float32 network on real photos: at least 40 dB
and at most 0.01 % of the pixels off by more than 32 levels (:func:`anipaint.quality.faithful`). The rocket's
flat sky is where White-box's guided filter speckled when its box filters ran in bf16.

Where bf16 is emulated (AVX2) oneDNN rounds the same way, only ~10x slower, so this runs on every CPU: the
modules checked are the export-ready ones a package is compiled from (:func:`graph_program.for_network`), run
eagerly at 256 px to stay cheap. The packages themselves are checked on every machine by
``test_every_backend_of_a_style_matches_its_eager_network`` in whatever dtype the machine builds.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from anipaint.engine import load_network
from anipaint.engine.compile import graph_program
from anipaint.engine.tensors import from_tensor, to_tensor
from anipaint.models import store
from anipaint.models.registry import all_styles, get_style
from anipaint.networks.architectures import get_architecture
from anipaint.quality import faithful, far_share, psnr
from anipaint.settings import reload_settings

# every style compiled through an export-ready module (v2 has its own bf16 graph, checked in test_animeganv2),
# with v1-hayao standing for the six v1 styles, which share one network
BF16_STYLES = [s.id for s in all_styles() if "compiled" in get_architecture(s.architecture).backends
               and s.architecture != "animeganv2" and (s.architecture != "animeganv1" or s.id == "v1-hayao")]


def _photo(img: Image.Image, side: int = 256) -> np.ndarray:
    img = img.convert("RGB")
    scale = side / max(img.size)
    return np.asarray(img.resize((round(img.width * scale) // 4 * 4, round(img.height * scale) // 4 * 4),
                                 Image.LANCZOS))


@pytest.fixture(scope="module")
def photos(group_photo, astronaut) -> dict[str, np.ndarray]:
    import skimage.data

    return {"group": _photo(group_photo), "astronaut": _photo(astronaut),
            "rocket": _photo(Image.fromarray(skimage.data.rocket()))}


def test_every_graph_style_and_white_box_are_checked():
    assert KEEPS_BF16 <= set(BF16_STYLES), BF16_STYLES


# Falling back to float32 is for a style bf16 can't paint faithfully (v3-sketch's near-binary lines), not a way
# round a precision bug: White-box's guided filter speckled until its box filters ran in float32.
KEEPS_BF16 = {"v3-hayao", "v3-shinkai", "whitebox", "v1-hayao"}


@pytest.mark.parametrize("style_id", BF16_STYLES)
def test_the_convolutions_a_fast_build_uses_stay_faithful_to_the_eager_network(style_id, prepared_store, photos):
    """The dtype a ``compiled`` build picks on a native-bf16 CPU (bf16 where it stays faithful on the check
    photos, else float32), then that module checked on these photos with both criteria."""
    style = get_style(style_id)
    settings = reload_settings()
    path = store.artefact_path(style, settings)
    assert path.is_file(), f"{style_id} was not converted"
    network = load_network(style, path)
    checks = [to_tensor(rgb) for rgb in photos.values()]
    dtype = graph_program.faithful_conv_dtype(network, checks, torch.bfloat16)
    if style_id in KEEPS_BF16:
        assert dtype == torch.bfloat16, f"{style_id}: bf16 convolutions no longer faithful"
    bf16, multiple = graph_program.for_network(network, dtype, compiled=True)  # the form a package compiles
    fp32, _ = graph_program.for_network(network)
    if dtype == torch.bfloat16 and not isinstance(bf16, graph_program.ExportableGraph):  # v1: nn.Conv2d swapped
        assert any(isinstance(m, graph_program.CastConv) for m in bf16.modules())
        assert not any(isinstance(m, torch.nn.Conv2d) and m.weight.shape[1] > 1 for m in bf16.modules())
    for i, (name, rgb) in enumerate(photos.items()):
        h, w = (n // multiple * multiple for n in rgb.shape[:2])
        x = to_tensor(np.ascontiguousarray(rgb[:h, :w]))
        with torch.inference_mode():
            want = from_tensor(network(x))
            got = from_tensor(bf16(x))
        db, far = psnr(got, want), far_share(got, want)
        assert faithful(db, far), (style_id, name, round(db, 1), f"{far:.4%} of pixels far off")
        if dtype == torch.bfloat16 and i == 0:  # bf16 did round: the check is not of the fp32 module
            with torch.inference_mode():
                assert db < psnr(from_tensor(fp32(x)), want), (style_id, name)

