"""Large-picture painting against one untiled pass: PSNR per style, photo and mode.

``python benchmarks/tiling_psnr.py [--styles v2-hayao,v1-hayao,v3-cute] [--size 640] [--tiles 256/64] [--oracle]``

The generators normalise every layer over the whole picture. In independent tiles each tile uses its own
statistics, so tiled and untiled differ by tone (v2: 23-30 dB, v1: 20-22 dB, v3-cute: 39-42 dB at 640 px in
256 px tiles). ``--oracle`` repaints v2 in tiles with the *untiled* picture's per-layer statistics forced into
every tile: that reaches ~60 dB, so the tiles' context is sufficient and the statistics are the whole difference.
Hence the strips (:mod:`anipaint.engine.strips`, the default ``large_mode``): layer by layer
over the whole picture in row strips, printed here as ``strips``; it differs from the untiled pass only by
bfloat16/float16 rounding. ``anipaint bench --only full`` times it against one whole pass and at 4096².
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np
import torch
from PIL import Image

import anipaint.engine.compile.v2_graph as graphs
from anipaint.engine import Engine, tiling
from anipaint.engine.compile.int8 import photos
from anipaint.engine.compile.v2_graph import V2Graph
from anipaint.engine.tensors import from_tensor, from_tensor_float, to_tensor
from anipaint.models import store
from anipaint.models.registry import get_style
from anipaint.quality import psnr
from anipaint.settings import get_settings

_ORIGINAL_NORM_ACT = graphs._norm_act


class StatsV2(V2Graph):
    """fp32 v2 graph that records its layer-norm statistics, or uses given ones instead of its own."""

    def __init__(self, state_dict):
        super().__init__(state_dict, torch.float32)
        self.record: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self.forced: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self._next = 0

    def norm_act(self, x, gamma, beta, act=True):
        if self.record is None and self.forced is None:
            return _ORIGINAL_NORM_ACT(x, gamma, beta, act)
        if self.forced is not None:
            mean, var = self.forced[self._next]
            self._next += 1
        else:
            var, mean = torch.var_mean(x, dim=(1, 2, 3), keepdim=True, correction=0)
            self.record.append((mean, var))
        y = (x - mean) * torch.rsqrt(var + 1e-12) * gamma.view(1, -1, 1, 1) + beta.view(1, -1, 1, 1)
        return torch.nn.functional.leaky_relu(y, 0.2) if act else y

    def __call__(self, x):
        self._next = 0
        graphs._norm_act = self.norm_act  # the graph calls the module-level function: route it here
        try:
            return super().__call__(x.contiguous(memory_format=torch.channels_last))
        finally:
            graphs._norm_act = _ORIGINAL_NORM_ACT


def oracle(settings, rgb: np.ndarray, tile: int, overlap: int) -> tuple[float, float]:
    style = get_style("v2-hayao")
    sd = torch.load(store.artefact_path(style, settings), map_location="cpu", weights_only=True)
    net = StatsV2(sd).eval()
    with torch.inference_mode():
        net.record = []
        whole = from_tensor(net(to_tensor(rgb)))
        stats, net.record = net.record, None
        own = tiling.paint_tiled(rgb, net, tile, overlap, to_tensor, from_tensor_float)
        net.forced = stats
        forced = tiling.paint_tiled(rgb, net, tile, overlap, to_tensor, from_tensor_float)
    return psnr(own, whole), psnr(forced, whole)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--styles", default="v2-hayao,v1-hayao,v3-cute")
    parser.add_argument("--size", type=int, default=640)
    parser.add_argument("--tiles", default="256/64")
    parser.add_argument("--oracle", action="store_true")
    args = parser.parse_args()
    settings = get_settings()
    pics = photos(settings, "check", side=args.size)
    if not pics:
        raise SystemExit("no photos found (samples folder or scikit-image)")
    rgbs = [from_tensor(p) for p in pics]
    for style_id in args.styles.split(","):
        style = get_style(style_id)
        store.convert([style_id], settings)
        engine = Engine(style, store.artefact_path(style, settings), settings)
        for i, rgb in enumerate(rgbs):
            whole = from_tensor(engine.run_float(to_tensor(rgb)))
            if engine.streams_large:
                t0 = time.perf_counter()
                got = engine._streamed_network().paint(rgb)
                print(f"{style_id:<10} photo {i} {rgb.shape[1]}x{rgb.shape[0]} exact (strips) vs untiled "
                      f"({engine.backend_name}): {psnr(got, whole):5.1f} dB, {time.perf_counter() - t0:.1f} s",
                      flush=True)
            for spec in args.tiles.split(","):
                tile, overlap = (int(v) for v in spec.split("/"))
                engine.settings = dataclasses.replace(settings, tile_size=tile, tile_overlap=overlap)
                got = tiling.paint_tiled(rgb, engine.run_float, tile, overlap, to_tensor, from_tensor_float)
                print(f"{style_id:<10} photo {i} {rgb.shape[1]}x{rgb.shape[0]} tile {tile}/{overlap} "
                      f"({engine.backend_name}): {psnr(got, whole):5.1f} dB", flush=True)
    if args.oracle:
        for i, rgb in enumerate(rgbs):
            own, forced = oracle(settings, rgb, 256, 64)
            print(f"v2 fp32 photo {i}: own tile statistics {own:.1f} dB, untiled statistics forced {forced:.1f} dB")


if __name__ == "__main__":
    Image.MAX_IMAGE_PIXELS = None
    main()
