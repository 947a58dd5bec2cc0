"""Full-resolution painting in bounded memory that paints exactly what one untiled pass paints.

Independent tiles can't do that: every norm layer of these generators normalises over the *whole* picture (v2's
layer norm over H, W and C; v1's and v3's instance norms over H and W per channel; v3's external attention takes a
softmax over all positions), and a tile only sees itself, so tiles come out 20-34 dB away from the untiled painting
(smooth tone shifts, see ``benchmarks/tiling_psnr.py``). Here the network runs one layer at a time over the whole
picture, in strips of rows: each layer reads the rows it needs of the previous one (reflect-padded at the picture's
edges, as the untiled network pads), writes its own output strip by strip to a temporary file and sums the
statistics its norm needs; once the layer is complete its statistics are final and the next layer normalises with
them. Memory is a few strips plus the model, whatever the picture's size; the activations live in float16 files
(freed as soon as their last reader is done; a 4096x4096 picture needs a few GB of disk at the widest point,
checked before the paint starts). Convolutions run in bfloat16 where the CPU has it, so results differ from the
float32 network by rounding only, and seams can't exist.

* :mod:`.row_sources`, :mod:`.executor`, :mod:`.networks`: AnimeGAN v1 and v2, their layers written out by hand;
* :mod:`.graph_plan`, :mod:`.graph_run`, :mod:`.rows`: any imported graph (the v3 styles), planned from its ops;
* :mod:`.scratch`: the per-paint temporary folders, and each long-running process's own folder that holds them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from anipaint.engine.strips.executor import StripNetwork
from anipaint.engine.strips.graph_run import StripGraph
from anipaint.engine.strips.networks import StripV1, StripV2
from anipaint.engine.strips.rows import NoStripPlan

__all__ = ["NoStripPlan", "StripGraph", "StripNetwork", "StripV1", "StripV2", "for_network"]


def _graph(network, folder: str | Path | None) -> StripGraph | None:
    try:
        return StripGraph(network, folder=folder)
    except NoStripPlan:  # an op the planner can't run over strips: painted in tiles instead
        return None


# How each architecture whose row says it has strips (``Architecture.has_strips``) is run in strips, by the row's name.
STRIP_RUNNERS: dict[str, Callable[[torch.nn.Module, str | Path | None], StripNetwork | StripGraph | None]] = {
    "animeganv2": lambda n, folder: StripV2(n.state_dict(), n.semantics, folder=folder),
    "animeganv2-port": lambda n, folder: StripV2(n.state_dict(), n.semantics, folder=folder),
    "animeganv1": lambda n, folder: StripV1(n.state_dict(), folder=folder),
    "graph": _graph,
}


def for_network(network: torch.nn.Module, architecture: str, folder: str | Path | None = None
                ) -> StripNetwork | StripGraph | None:
    """The strip version of an architecture's eager network, or None when it has none."""
    streamer = STRIP_RUNNERS.get(architecture)
    return streamer(network, folder) if streamer else None
