"""The full-resolution table: each strip style's strip executor against one whole-picture pass.

Per style (v3-hayao, v3-shinkai, v2-hayao, v1-hayao):

* at a side both can hold in memory (1280 px; 768 with ``--quick``): the strip executor and one whole-picture
  pass of the eager network, timed in turns in this process; ratio = whole ÷ strips (0.5 = the strips take
  twice as long), PSNR of the strips' picture against the whole pass;
* at 4096 px (2048 with ``--quick``): the strip executor alone in a child process, for its own peak RSS and
  seconds per megapixel against the smaller run (equal figures: time linear in pixels).

Child mode: ``python -m anipaint.cli.bench child stream <style> <side>``.
"""

from __future__ import annotations

import json
import time

import numpy as np
import torch
from PIL import Image

from anipaint.cli.bench.measure import Row, cpu_seconds, peak_rss_mb, run_child
from anipaint.engine.runtime import timing

STYLES = ("v3-hayao", "v3-shinkai", "v2-hayao", "v1-hayao")
SAMPLE = "group_pakutaso.jpg"


def _picture(settings, side: int) -> np.ndarray:
    return np.asarray(Image.open(settings.samples_dir / SAMPLE).convert("RGB").resize((side, side), Image.LANCZOS))


def _strip_runner(style_id: str, settings):
    from anipaint.engine import load_network
    from anipaint.engine.strips import for_network
    from anipaint.models import store
    from anipaint.models.registry import get_style

    style = get_style(style_id)
    network = load_network(style, store.artefact_path(style, settings))
    return network, for_network(network, style.architecture, settings.scratch_dir)


def child_stream(style_id: str, side: int) -> int:
    """Paint one ``side``² picture with the strip executor; print seconds, CPU % and this process's peak RSS."""
    from anipaint.settings import get_settings

    settings = get_settings()
    _, strips_net = _strip_runner(style_id, settings)
    rgb = _picture(settings, side)
    c0, t0 = cpu_seconds(), time.perf_counter()
    out = strips_net.paint(rgb)
    wall = time.perf_counter() - t0
    print(json.dumps({"seconds": wall, "cpu": 100.0 * (cpu_seconds() - c0) / wall, "rss_mb": peak_rss_mb(),
                      "std": float(out.std())}))
    return 0


def _style_rows(style_id: str, settings, side: int, large: int, rounds: int) -> list[Row]:
    from anipaint.engine import from_tensor, to_tensor
    from anipaint.quality import psnr

    network, strips_net = _strip_runner(style_id, settings)
    if strips_net is None:
        return [Row(f"{style_id}: full resolution", float("nan"), note="does not stream: tiles")]
    rgb = _picture(settings, side)
    strips_net.paint(rgb[:64, :64])
    pictures: dict[str, np.ndarray] = {}

    def run_strips() -> None:
        pictures["strips"] = strips_net.paint(rgb)

    def run_whole() -> None:
        with torch.inference_mode():
            pictures["whole"] = from_tensor(network(to_tensor(rgb)))

    times = timing.alternate({"whole": run_whole, "strips": run_strips}, rounds=rounds)
    whole, strips = times["whole"], times["strips"]
    per_mp = strips.seconds / (side * side / 1e6)
    got = run_child("stream", style_id, str(large), timeout=3600)
    return [
        Row(f"{style_id}: {side} px, one whole pass", whole.seconds, 1.0, noise=whole.foreign),
        Row(f"{style_id}: {side} px, strips", strips.seconds, whole.seconds / strips.seconds,
            psnr=psnr(pictures["strips"], pictures["whole"]), noise=strips.foreign, note=f"{per_mp:.2f} s/MP"),
        Row(f"{style_id}: {large} px, strips", got["seconds"], None, got["cpu"], got["rss_mb"],
            note=f"{got['seconds'] / (large * large / 1e6):.2f} s/MP vs {per_mp:.2f} at {side} px; child process"),
    ]


def full_rows(settings, rounds: int, quick: bool) -> list[Row]:
    """The table's rows for :data:`STYLES`; a style whose source is missing gets a row saying so."""
    from anipaint.models import store

    side, large = (768, 2048) if quick else (1280, 4096)
    rows: list[Row] = []
    for style_id in STYLES:
        if store.convert([style_id], settings).get(style_id) != "ok":
            rows.append(Row(f"{style_id}: full resolution", float("nan"), note="not available here"))
            continue
        rows += _style_rows(style_id, settings, side, large, max(1, rounds - 1))
    return rows
