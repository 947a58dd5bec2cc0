"""bfloat16 convolutions, as ``compiled`` builds them for the graph styles and v1 on CPUs that multiply bf16
natively (AVX512_BF16, AMX), stay within the fast engine's bar of each style's eager float32 network on real
photos.

Where bf16 is emulated (AVX2) oneDNN rounds the same way, only ~10x slower, so this runs on every CPU: the
modules checked are the export-ready ones a package is compiled from (:func:`graph_compile.for_network`), run
eagerly at 256 px to stay cheap. The packages themselves are checked on every machine by
``test_every_backend_of_a_style_matches_its_eager_network`` in whatever dtype the machine builds.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from anipaint import store
from anipaint.engine import graph_compile, load_network
from anipaint.engine.tensors import from_tensor, to_tensor
from anipaint.quality import psnr
from anipaint.registry import get_style
from anipaint.settings import reload_settings

EAGER_BAR = 40.0  # a fast backend of a graph or v1 style against that style's own eager network


def _photo(img: Image.Image, side: int = 256) -> np.ndarray:
    img = img.convert("RGB")
    scale = side / max(img.size)
    return np.asarray(img.resize((round(img.width * scale) // 4 * 4, round(img.height * scale) // 4 * 4),
                                 Image.LANCZOS))


@pytest.mark.parametrize("style_id", ["v3-hayao", "v3-shinkai", "v1-hayao"])
def test_bf16_convolutions_stay_close_to_the_eager_network(style_id, prepared_store, group_photo, astronaut):
    style = get_style(style_id)
    network = load_network(style, store.artefact_path(style, reload_settings()))
    bf16, _ = graph_compile.for_network(network, torch.bfloat16)
    fp32, _ = graph_compile.for_network(network)
    if not isinstance(bf16, graph_compile.ExportableGraph):  # v1: each of its nn.Conv2d layers is swapped
        assert any(isinstance(m, graph_compile.CastConv) for m in bf16.modules())
        assert not any(isinstance(m, torch.nn.Conv2d) for m in bf16.modules())
    for name, img in {"group": group_photo, "astronaut": astronaut}.items():
        x = to_tensor(_photo(img))
        with torch.inference_mode():
            want = from_tensor(network(x))
            got = from_tensor(bf16(x))
            same = from_tensor(fp32(x))
        db = psnr(got, want)
        assert db >= EAGER_BAR, (style_id, name, db)
        assert db < psnr(same, want), (style_id, name)  # bf16 did round: the check is not of the fp32 module
