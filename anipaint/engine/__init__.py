"""Pipeline step 3: run a style's generator on a picture.

``load_network`` builds the eager network from the store's artefact; :class:`Engine` owns one loaded network
per style plus its fastest backend (:mod:`anipaint.engine.backends`: eager torch, AOT-compiled bf16, int8,
ONNX Runtime; ``auto`` picks per machine) and turns RGB uint8 arrays into painted RGB uint8 arrays. Large
pictures run in bounded memory: exactly, layer by layer, for AnimeGAN v1/v2 and the imported v3 graphs
(:mod:`anipaint.engine.strips`), in blended tiles otherwise (:mod:`anipaint.engine.tiling`). :func:`build_backends`
builds and measures the backends ahead of time (``anipaint models prepare``), so a server starts painting from
cached artefacts within a second or two.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from anipaint.engine import backends, tiling
from anipaint.engine.runners import StripsBackend
from anipaint.engine.runtime import progress, threads
from anipaint.engine.tensors import batch_from_tensor, batch_to_tensor, from_tensor, from_tensor_float, to_tensor
from anipaint.models.registry import Style
from anipaint.networks.animeganv2 import MIN_SIZE as MIN_SIDE  # the largest minimum of any network
from anipaint.networks.architectures import get_architecture
from anipaint.settings import Settings


class Generator(Protocol):
    """What every network looks like to the engine: NCHW float in [-1, 1] → same shape, any H and W."""

    def __call__(self, x: torch.Tensor) -> torch.Tensor: ...


def load_network(style: Style, artefact: Path) -> Generator:
    """The plain (eager, float32) network for a style from its converted artefact."""
    return get_architecture(style.architecture).build(Path(artefact))


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
        self.backend = backends.open_backend(style, self.artefact, settings, self.network, backend)
        self._strips = None
        self._batches: bool | None = None  # whether the backend took a batch of crops (None: not tried yet)

    @property
    def large_in_strips(self) -> bool:
        """Whether large pictures run layer by layer with whole-picture statistics (else in tiles)."""
        if not self.settings.large_in_strips:
            return False
        return get_architecture(self.style.architecture).has_strips and self._strip_network() is not None

    def _strip_network(self):
        from anipaint.engine.strips import for_network

        if self._strips is None:
            if isinstance(self.backend, StripsBackend):  # already loaded: share its weights
                self._strips = self.backend.strips
            else:
                self._strips = for_network(self.network, self.style.architecture, self.settings.scratch_dir)
        return self._strips

    @property
    def backend_name(self) -> str:
        return self.backend.name

    def run_float(self, x: torch.Tensor) -> torch.Tensor:
        """NCHW float in [-1, 1] → same, in one pass (no tiling)."""
        with torch.inference_mode():
            return self.backend(x)

    def run_batch(self, crops: np.ndarray) -> np.ndarray:
        """(N, H, W, 3) uint8 → painted, same shape: one generator call where the backend takes a batch."""
        if len(crops) > 1 and self.backend.batches and self._batches is not False:
            try:
                painted = batch_from_tensor(self.run_float(batch_to_tensor(crops)))
            except RuntimeError:
                # Some imported graphs carry a batch of one in their Reshape constants: paint one at a time.
                self._batches = False
            else:
                self._batches = True
                return painted
        return np.stack([self.run(crop) for crop in crops])

    def run(self, rgb: np.ndarray, progress: Callable[[float], None] | None = None) -> np.ndarray:
        """Paint RGB uint8 (H, W, 3) → RGB uint8 of the same size.

        Pictures over four tiles' worth of pixels run in bounded memory: layer by layer where the network
        streams (``large_mode="strips"``: AnimeGAN v1, v2 and the imported graphs), else in blended tiles.
        ``progress`` gets the fraction done of those.
        """
        h, w = rgb.shape[:2]
        if min(h, w) < MIN_SIDE:  # edge-padded to what every network paints, then cropped back
            grow = ((0, max(0, MIN_SIDE - h)), (0, max(0, MIN_SIDE - w)), (0, 0))
            return self.run(np.pad(rgb, grow, mode="edge"), progress)[:h, :w]
        tile = self.settings.tile_size
        if tiling.needs_tiling(h, w, tile):
            if self.large_in_strips:
                return self._strip_network().paint(rgb, progress)
            return tiling.paint_tiled(rgb, self.run_float, tile, self.settings.tile_overlap, to_tensor,
                                      from_tensor_float, progress)
        return from_tensor(self.run_float(to_tensor(rgb)))


def build_backends(style: Style, artefact: Path, settings: Settings, backend: str | None = None) -> dict:
    """Build (and for ``auto`` measure) the style's backends now, so the first picture doesn't wait.

    Returns the auto choice record (``{"choice": ..., "results": {...}}``) or, for a named backend, ``{"choice":
    name, "build_seconds": s}``. The libraries' warnings and prints on the way are held back
    (:func:`anipaint.engine.runtime.progress.quiet`); its steps are reported
    (:func:`anipaint.engine.runtime.progress.step`).
    """
    threads.configure(settings.jobs, settings.threads)
    name = backends.wanted(settings, backend)
    if len(backends.applicable(style)) == 1:
        return {"choice": backends.PLAIN}
    with progress.quiet():
        network = load_network(style, Path(artefact))
        if name == backends.AUTO:
            from anipaint.engine.select import choose

            return choose(style, Path(artefact), settings, network)
        progress.step(style.id, f"building {name}")
        started = time.perf_counter()
        backends.open_named(name, style, Path(artefact), settings, network)
    return {"choice": name, "build_seconds": round(time.perf_counter() - started, 1)}
