"""Pipeline step 3: run a style's generator on a picture.

``load_network`` builds the eager network from the store's artefact; :class:`Engine` owns one loaded network
per style and turns RGB uint8 arrays into painted RGB uint8 arrays, tiling large pictures.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from anipaint.engine import threads
from anipaint.registry import Style
from anipaint.settings import Settings


class Generator(Protocol):
    """What every network looks like to the engine: NCHW float in [-1, 1] → same shape, any H and W."""

    def __call__(self, x: torch.Tensor) -> torch.Tensor: ...


def load_network(style: Style, artefact: Path) -> Generator:
    """The plain (eager, float32) network for a style from its converted artefact."""
    if style.architecture == "animeganv2":
        from anipaint.networks.animeganv2 import Generator as V2

        net = V2()
        net.load_state_dict(torch.load(artefact, map_location="cpu", weights_only=True), strict=True)
        return net.eval()
    if style.architecture == "animeganv1":
        from anipaint.networks.animeganv1 import Generator as V1

        net = V1()
        net.load_state_dict(torch.load(artefact, map_location="cpu", weights_only=True), strict=True)
        return net.eval()
    if style.architecture == "graph":
        from anipaint.importers.graph_module import GraphModule

        return GraphModule.from_file(artefact).eval()
    if style.architecture == "onnx":
        from anipaint.engine.onnx_generator import OnnxGenerator

        return OnnxGenerator(artefact, threads=torch.get_num_threads())
    raise ValueError(f"unknown architecture {style.architecture!r}")


def to_tensor(rgb: np.ndarray) -> torch.Tensor:
    """RGB uint8 (H, W, 3) → float32 (1, 3, H, W) in [-1, 1]."""
    t = torch.from_numpy(np.ascontiguousarray(rgb)).permute(2, 0, 1).unsqueeze(0).float()
    return t.div_(127.5).sub_(1.0)


def from_tensor(t: torch.Tensor) -> np.ndarray:
    """float (1, 3, H, W) in [-1, 1] → RGB uint8 (H, W, 3)."""
    out = t.squeeze(0).clamp(-1.0, 1.0).add(1.0).mul(127.5).round()
    return out.permute(1, 2, 0).to(torch.uint8).numpy()


class Engine:
    """One style's loaded generator, shared by every request in the process."""

    def __init__(self, style: Style, artefact: Path, settings: Settings) -> None:
        threads.configure(settings.jobs, settings.threads)
        self.style = style
        self.settings = settings
        self.network = load_network(style, artefact)
        self._lock = threading.Lock()  # torch modules are re-entrant; the lock guards lazy backend swaps

    def run_float(self, x: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return self.network(x)

    def run(self, rgb: np.ndarray) -> np.ndarray:
        """Paint RGB uint8 (H, W, 3) → RGB uint8 of the same size."""
        return from_tensor(self.run_float(to_tensor(rgb)))
