"""The style table and the architecture table: every row is complete and consistent with the code that uses it."""

from __future__ import annotations

import re

import pytest

from anipaint import importers
from anipaint.errors import StyleError
from anipaint.models import availability
from anipaint.models.registry import ALIASES, aliases_of, all_styles, get_style, style_id
from anipaint.networks.architectures import ARCHITECTURES, get_architecture
from anipaint.settings import Settings


def test_every_style_names_a_known_architecture_and_converter():
    for style in all_styles():
        assert style.architecture in ARCHITECTURES, style.id
        assert style.importer in importers.CONVERTERS, style.id


def test_style_ids_are_unique_lowercase_and_sources_are_relative_with_real_checksums():
    ids = [s.id for s in all_styles()]
    assert len(ids) == len(set(ids))
    for style in all_styles():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", style.id), style.id
        assert style.label and style.licence, style.id
        for src in style.sources:
            assert not src.path.startswith("/") and ".." not in src.path.split("/"), src.path
            assert src.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", src.sha256), src.path


def test_the_page_says_what_every_style_is_in_chinese_too():
    """The page shows a style's description from the server (English) or, in Chinese, its own `style.about.<id>`;
    a style added without one would read English on the Chinese page."""
    from anipaint.service.routes.page import STATIC

    strings = (STATIC / "i18n.js").read_text(encoding="utf-8")
    about = dict(re.findall(r'"style\.about\.([a-z0-9-]+)": "([^"]+)"', strings))
    assert set(about) == {style.id for style in all_styles()}
    assert all(re.search(r"[\u4e00-\u9fff]", text) for text in about.values())


def test_aliases_point_at_real_styles_and_never_shadow_an_id():
    ids = {s.id for s in all_styles()}
    for alias, target in ALIASES.items():
        assert alias not in ids
        assert target in ids, alias


def test_names_resolve_case_and_underscore_insensitively():
    assert style_id("V3_Hayao") == "v3-hayao"
    with pytest.raises(StyleError, match="unknown style"):
        style_id("no-such-style")


def test_an_alias_means_one_documented_style_on_every_machine(tmp_path):
    """Not whichever of several happens to be present: ``hayao`` is v3-hayao even where only v2's files are."""
    assert style_id("hayao") == "v3-hayao" and style_id("shinkai") == "v3-shinkai"
    assert aliases_of("v3-hayao") == ("hayao",)
    only_v2 = tmp_path / "sources"
    for src in get_style("v2-hayao").sources:
        (only_v2 / src.path).parent.mkdir(parents=True, exist_ok=True)
        (only_v2 / src.path).write_bytes(b"v2 only")
    s = Settings(sources=only_v2, home=tmp_path / "home", offline=True)
    with pytest.raises(StyleError, match="run `anipaint models fetch v3-hayao`"):
        availability.resolve("hayao", s)
    assert availability.resolve("v2-hayao", s).id == "v2-hayao"


def test_every_architecture_runs_eagerly_first_and_names_real_backends():
    from anipaint.engine.backends import NAMES

    for arch in ARCHITECTURES.values():
        assert arch.backends[0] == "torch", arch.name
        assert set(arch.backends) <= set(NAMES), arch.name
    with pytest.raises(ValueError, match="unknown architecture"):
        get_architecture("nope")


def test_the_v2_layer_plan_is_read_off_the_module():
    """The plan that drives the reference, the export graph and the strip executor is the module's own:
    every conv weight of the module appears in it once, in the module's order."""
    from anipaint.networks.animeganv2 import PLAN, ConvSpec, Generator

    weights = [k for k, v in Generator().state_dict().items() if v.dim() == 4 and k != "out_layer.0.weight"]
    planned = []
    for step in PLAN:
        if isinstance(step, ConvSpec):
            planned.append(f"{step.prefix}.1.weight")
        elif step.startswith("project:"):
            planned.append(f"{step.split(':', 1)[1]}.layers.2.weight")
    assert planned == weights
    strided = [s.prefix for s in PLAN if isinstance(s, ConvSpec) and s.stride == 2]
    assert strided == ["block_a.1", "block_b.0"]


def test_module_reference_and_export_graph_compute_one_function(group_photo):
    """One plan, three ways of running it: the eager module, the plain-call reference and the fp32 export graph
    agree to float rounding on a real photo whose sides are not multiples of 4."""
    import numpy as np
    import torch

    from anipaint.engine.compile.v2_graph import V2Graph
    from anipaint.engine.tensors import to_tensor
    from anipaint.networks.animeganv2 import Generator, ReferenceV2, pad_input

    torch.manual_seed(0)
    net = Generator().eval()
    for p in net.parameters():  # trained-looking scales: random init leaves the norms' affine at 1/0
        p.data.add_(0.05 * torch.randn_like(p))
    x = to_tensor(np.asarray(group_photo.resize((94, 70))))
    with torch.inference_mode():
        eager = net(x)
        reference = ReferenceV2(net.state_dict())(x)
        graph = V2Graph(net.state_dict(), torch.float32).eval()(pad_input(x))[..., :70, :94]
    assert torch.allclose(eager, reference, atol=1e-4)
    assert torch.allclose(eager, graph, atol=1e-4)
