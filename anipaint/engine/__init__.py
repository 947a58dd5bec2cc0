"""Pipeline step 3: run a style's generator on a picture.

``load_network`` builds the eager network from the store's artefact; :class:`Engine` owns one loaded network
per style plus its fastest backend (:mod:`anipaint.engine.backends`: eager torch, AOT-compiled bf16, int8,
ONNX Runtime; ``auto`` picks per machine) and turns RGB uint8 arrays into painted RGB uint8 arrays. Large
pictures run in bounded memory: exactly, layer by layer, for AnimeGAN v1/v2 (:mod:`anipaint.engine.streaming`),
in blended tiles otherwise (:mod:`anipaint.engine.tiling`). :func:`prepare` builds and measures the backends
ahead of time (``anipaint models prepare``), so a server starts painting from cached artefacts within a second
or two.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from anipaint.engine import backends, threads, tiling
from anipaint.registry import Style
from anipaint.settings import Settings


class Generator(Protocol):
    """What every network looks like to the engine: NCHW float in [-1, 1] → same shape, any H and W."""

    def __call__(self, x: torch.Tensor) -> torch.Tensor: ...


def load_network(style: Style, artefact: Path) -> Generator:
    """The plain (eager, float32) network for a style from its converted artefact."""
    if style.architecture == "animeganv2":
        from anipaint.networks.animeganv2 import Generator as V2

        net = V2(semantics="port" if style.importer == "torch_port" else "tf")
        net.load_state_dict(torch.load(artefact, map_location="cpu", weights_only=True), strict=True)
        return net.eval()
    if style.architecture == "animeganv1":
        from anipaint.networks.animeganv1 import Generator as V1

        net = V1()
        net.load_state_dict(torch.load(artefact, map_location="cpu", weights_only=True), strict=True)
        return net.eval()
    if style.architecture == "graph":
        from anipaint.networks.graph_module import GraphModule

        return GraphModule.from_file(artefact).eval()
    if style.architecture == "onnx":
        from anipaint.networks.onnx_generator import OnnxGenerator

        return OnnxGenerator(artefact, threads=torch.get_num_threads())
    raise ValueError(f"unknown architecture {style.architecture!r}")


def to_tensor(rgb: np.ndarray) -> torch.Tensor:
    """RGB uint8 (H, W, 3) → float32 (1, 3, H, W) in [-1, 1]."""
    t = torch.from_numpy(np.require(rgb, requirements=["C", "W"])).permute(2, 0, 1).unsqueeze(0).float()
    return t.div_(127.5).sub_(1.0)


def from_tensor(t: torch.Tensor) -> np.ndarray:
    """float (1, 3, H, W) in [-1, 1] → RGB uint8 (H, W, 3)."""
    out = t.squeeze(0).clamp(-1.0, 1.0).add(1.0).mul(127.5).round()
    return out.permute(1, 2, 0).to(torch.uint8).numpy()


def from_tensor_float(t: torch.Tensor) -> np.ndarray:
    """float (1, 3, H, W) in [-1, 1] → float32 (H, W, 3) in [0, 255], unrounded (for blending tiles)."""
    out = t.squeeze(0).float().clamp(-1.0, 1.0).add(1.0).mul(127.5)
    return np.ascontiguousarray(out.permute(1, 2, 0).numpy())


class Engine:
    """One style's loaded generator, shared by every request in the process.

    ``backend`` overrides ``settings.backend`` (auto | torch | compiled | int8 | onnxruntime); a backend that
    doesn't apply to the style's architecture falls back to the plain network.
    """

    def __init__(self, style: Style, artefact: Path, settings: Settings, backend: str | None = None) -> None:
        self.threads = threads.configure(settings.jobs, settings.threads)
        self.style = style
        self.settings = settings
        self.artefact = Path(artefact)
        self.network = load_network(style, self.artefact)
        self.backend = backends.open_backend(style, self.artefact, settings, self.network, backend or settings.backend)
        self._streamed = None

    @property
    def streams_large(self) -> bool:
        """Whether large pictures run layer by layer with whole-picture statistics (else in tiles)."""
        return "strips" in backends.applicable(self.style) and self.settings.large_mode.lower() == "exact"

    def _streamed_network(self):
        from anipaint.engine.streaming import for_network

        if self._streamed is None:
            if isinstance(self.backend, backends.StripsBackend):  # already loaded: share its weights
                self._streamed = self.backend.streamed
            else:
                self._streamed = for_network(self.network, self.settings.scratch_dir)
        return self._streamed

    @property
    def backend_name(self) -> str:
        return self.backend.name

    def run_float(self, x: torch.Tensor) -> torch.Tensor:
        """NCHW float in [-1, 1] → same, in one pass (no tiling)."""
        with torch.inference_mode():
            return self.backend(x)

    def run(self, rgb: np.ndarray, progress: Callable[[float], None] | None = None) -> np.ndarray:
        """Paint RGB uint8 (H, W, 3) → RGB uint8 of the same size.

        Pictures over four tiles' worth of pixels run in bounded memory: layer by layer for AnimeGAN v1 and v2
        (``large_mode="exact"``), else in blended tiles. ``progress`` gets the fraction done of those.
        """
        h, w = rgb.shape[:2]
        tile = self.settings.tile_size
        if tiling.needs_tiling(h, w, tile):
            if self.streams_large:
                return self._streamed_network().paint(rgb, progress)
            return tiling.paint_tiled(rgb, self.run_float, tile, self.settings.tile_overlap, to_tensor,
                                      from_tensor_float, progress)
        return from_tensor(self.run_float(to_tensor(rgb)))


def prepare(style: Style, artefact: Path, settings: Settings, backend: str | None = None) -> dict:
    """Build (and for ``auto`` measure) the style's backends now, so the first picture doesn't wait.

    Returns the auto choice record (``{"choice": ..., "results": {...}}``) or ``{"choice": name}``.
    """
    threads.configure(settings.jobs, settings.threads)
    name = (backend or settings.backend or "auto").lower()
    if len(backends.applicable(style)) == 1:
        return {"choice": "torch"}
    network = load_network(style, Path(artefact))
    if name == "auto":
        from anipaint.engine.select import choose

        return choose(style, Path(artefact), settings, network)
    backends.open_named(name, style, Path(artefact), settings, network)
    return {"choice": name}
