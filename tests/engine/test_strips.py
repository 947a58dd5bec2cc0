"""Full resolution, exactly: every streamed style against one whole-picture pass, memory, scratch space, progress.

The v3 graphs run through the generic strip executor (``engine/strips/graph_*``): whole-picture norm statistics
and the attention's softmax over all positions accumulated over strips, compared here with the eager graph module
run once on the whole picture, at sizes that are not multiples of the graphs' stride.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from PIL import Image

from anipaint.engine import Engine, from_tensor, load_network, tiling, to_tensor
from anipaint.engine.strips import StripGraph, for_network, graph_plan
from anipaint.errors import ScratchSpaceError
from anipaint.models import store
from anipaint.models.registry import all_styles, get_style
from anipaint.networks.graph_module import GraphModule
from anipaint.quality import psnr
from anipaint.settings import reload_settings
from support.paths import SAMPLES

EXACT_BAR = 40.0  # streamed against one whole-picture pass (bf16 convolutions, float16 activations: ~45-70 dB)


@pytest.fixture(scope="module")
def settings(prepared_store):
    return dataclasses.replace(reload_settings(), tile_size=256, tile_overlap=64)


def _picture(width: int, height: int) -> np.ndarray:
    img = Image.open(SAMPLES / "group_pakutaso.jpg").convert("RGB")
    return np.asarray(img.resize((width, height), Image.LANCZOS))


def test_the_v3_graphs_are_streamed(settings):
    graphs = [s.id for s in all_styles() if store.is_converted(s, settings)
              and isinstance(load_network(s, store.artefact_path(s, settings)), GraphModule)]
    assert {"v3-hayao", "v3-shinkai"} <= set(graphs), graphs
    for style_id in graphs:
        style = get_style(style_id)
        assert Engine(style, store.artefact_path(style, settings), settings).large_in_strips, style_id


def test_every_architecture_that_streams_has_a_strip_executor():
    """An architecture row saying it paints full resolution exactly is backed by the streaming table, and only
    those rows are (the service's 507 admission and the engine read the row)."""
    from anipaint.engine.strips import STRIP_RUNNERS
    from anipaint.networks.architectures import ARCHITECTURES

    assert set(STRIP_RUNNERS) == {name for name, row in ARCHITECTURES.items() if row.has_strips}


# AnimeGAN v1/v2 have their own streaming tests (test_engine: strips against one untiled pass)
GRAPH_STYLES = [s.id for s in all_styles() if s.architecture == "graph"]


@pytest.mark.parametrize("style_id", GRAPH_STYLES)
def test_every_graph_style_streams_exactly_like_one_whole_pass(style_id, settings, tmp_path, monkeypatch):
    """331x243 (odd sides, not multiples of 8) through the engine as a user paints a large picture, with strips a
    quarter of their usual bytes and 128 px tiles: as many strips and tile seams as a 643x483 picture gets by
    default, for a quarter of the painting."""
    monkeypatch.setattr(graph_plan, "STRIP_BYTES", graph_plan.STRIP_BYTES // 4)
    settings = dataclasses.replace(settings, tile_size=128, tile_overlap=32)
    style = get_style(style_id)
    assert store.is_converted(style, settings), f"{style_id} was not converted"
    engine = Engine(style, store.artefact_path(style, settings), dataclasses.replace(settings, scratch_dir=tmp_path))
    assert isinstance(engine.network, GraphModule)
    rgb = _picture(331, 243)
    assert tiling.needs_tiling(*rgb.shape[:2], settings.tile_size) and engine.large_in_strips
    seen: list[float] = []
    got = engine.run(rgb, seen.append)
    whole = from_tensor(engine.run_float(to_tensor(rgb)))
    tiles = Engine(style, store.artefact_path(style, settings), dataclasses.replace(settings, large_mode="tiles"))
    exact_db, tiles_db = psnr(got, whole), psnr(tiles.run(rgb), whole)
    assert got.shape == rgb.shape
    assert exact_db >= EXACT_BAR, (exact_db, tiles_db)
    assert exact_db > tiles_db + 5, (exact_db, tiles_db)  # the whole picture's statistics, not a tile's
    assert seen == sorted(seen) and seen[-1] == 1.0 and len(seen) > 10, seen  # progress per layer
    assert list(tmp_path.iterdir()) == []  # scratch removed


def test_v3_hayao_at_1283x967_matches_one_whole_pass(settings, tmp_path):
    style = get_style("v3-hayao")
    module = load_network(style, store.artefact_path(style, settings))
    rgb = _picture(1283, 967)
    got = StripGraph(module, folder=tmp_path).paint(rgb)
    whole = from_tensor(module(to_tensor(rgb)))
    assert psnr(got, whole) >= EXACT_BAR


def test_scratch_space_is_checked_before_painting_and_removed_on_failure(settings, tmp_path, monkeypatch):
    from anipaint.engine.strips import scratch

    style = get_style("v3-hayao")
    streamed = for_network(load_network(style, store.artefact_path(style, settings)), style.architecture, tmp_path)
    rgb = _picture(320, 240)
    real = scratch.shutil.disk_usage
    monkeypatch.setattr(scratch.shutil, "disk_usage", lambda p: real(p)._replace(free=1 << 20))  # 1 MB free
    calls: list[float] = []
    with pytest.raises(ScratchSpaceError, match="needs .* GB of temporary files"):
        streamed.paint(rgb, calls.append)
    assert calls == [] and list(tmp_path.iterdir()) == []  # refused before the first layer
    monkeypatch.undo()

    def cancel(fraction: float) -> None:
        if fraction > 0.3:
            raise KeyboardInterrupt  # a job cancelled (or a worker stopped) mid-paint
    with pytest.raises(KeyboardInterrupt):
        streamed.paint(rgb, cancel)
    assert list(tmp_path.iterdir()) == []


MEMORY_SCRIPT = """
import sys, numpy as np
from PIL import Image
from anipaint.models import store
from anipaint.cli.bench.measure import peak_rss_mb
from anipaint.engine import load_network
from anipaint.engine.strips import for_network
from anipaint.models.registry import get_style
style = get_style(sys.argv[1])
painter = for_network(load_network(style, store.artefact_path(style)), style.architecture, sys.argv[3])
rgb = np.asarray(Image.open(sys.argv[2]))
painter.paint(rgb[:64, :64])  # warm-up: what the process holds before a big picture
before = peak_rss_mb()
out = painter.paint(rgb)
after = peak_rss_mb()
print(int(before), int(after), out.shape, float(out.std()))
"""


@pytest.mark.parametrize("style_id", ["v2-hayao", "v3-hayao", "v3-shinkai"])
def test_large_picture_memory_stays_bounded(style_id, settings, tmp_path, memory_probe):
    """2048x2048: one full-resolution 128-channel activation alone would be 2 GiB; the strips stay far below."""
    Image.fromarray(_picture(2048, 2048)).save(tmp_path / "in.png")
    scratch_dir = tmp_path / "scratch"
    scratch_dir.mkdir()
    done = memory_probe(MEMORY_SCRIPT, style_id, str(tmp_path / "in.png"), str(scratch_dir))
    assert done.returncode == 0, done.stderr[-2000:]
    before_mb, after_mb, *rest = done.stdout.split()
    assert int(after_mb) < 2048, done.stdout  # MB peak RSS of the whole process
    assert int(after_mb) - int(before_mb) < 500, done.stdout  # MB grown by the big picture (measured: ~100-300)
    assert "(2048, 2048, 3)" in done.stdout and float(rest[-1]) > 10  # a painted picture, not a blank one
    assert list(scratch_dir.iterdir()) == []
