"""The table of network architectures: one row per way a style's network is built and run.

A style (:mod:`anipaint.models.registry`) names its architecture; everything that depends on it — which file the store
keeps, how the eager network is built from it, which engine backends apply, what a faster backend is checked
against — is read from that architecture's row here, never decided by comparing names elsewhere. Adding an
architecture is one new row and its network module.

Backend names are the engine's (:mod:`anipaint.engine.backends`); ``strips`` also means the architecture paints
full-resolution pictures exactly, layer by layer (:mod:`anipaint.engine.strips`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported by the builders only: reading the table (`anipaint styles`) stays fast
    from torch import Tensor

Network = Callable[["Tensor"], "Tensor"]  # NCHW float in [-1, 1] -> same shape, any H and W


@dataclass(frozen=True)
class Architecture:
    name: str
    build: Callable[[Path], Network]  # the plain eager float32 network from the artefact
    backends: tuple[str, ...]  # engine backends that can run it, the plain one ("torch") first
    reference: Callable[[Path, Network], Network] | None = None  # the yardstick; None: the eager network itself
    description: str = ""
    # Full-resolution pictures are painted exactly, layer by layer over row strips in scratch files
    # (anipaint.engine.strips), so they need scratch space. For imported graphs: those whose ops all stream;
    # the others paint in tiles, and the service's scratch check is then on the safe side.
    has_strips: bool = False
    # How the fast builds are made: "network" exports the eager network (anipaint.engine.compile.graph_program);
    # "weights" rebuilds AnimeGAN v2 from its state dict as the engine's own export graph (engine/compile/v2_graph.py).
    builds_from: str = "network"


def _state_dict(artefact: Path) -> dict[str, Any]:
    import torch

    return torch.load(artefact, map_location="cpu", weights_only=True)


def _v2(semantics: str) -> Callable[[Path], Network]:
    def build(artefact: Path) -> Network:
        from anipaint.networks.animeganv2 import Generator

        net = Generator(semantics=semantics)
        net.load_state_dict(_state_dict(artefact), strict=True)
        return net.eval()

    return build


def _v2_reference(artefact: Path, network: Network) -> Network:  # noqa: ARG001 - same signature for every row
    from anipaint.networks.animeganv2 import ReferenceV2

    return ReferenceV2(_state_dict(artefact))


def _v1(artefact: Path) -> Network:
    from anipaint.networks.animeganv1 import AnimeGANv1Generator

    net = AnimeGANv1Generator()
    net.load_state_dict(_state_dict(artefact), strict=True)
    return net.eval()


def _graph(artefact: Path) -> Network:
    from anipaint.networks.graph_module import GraphModule

    return GraphModule.from_file(artefact).eval()


ARCHITECTURES: dict[str, Architecture] = {
    row.name: row
    for row in (
        Architecture(
            "animeganv2", _v2("tf"), ("torch", "compiled", "int8", "onnxruntime", "strips"),
            reference=_v2_reference, has_strips=True, builds_from="weights",
            description="AnimeGANv2 with the official TensorFlow graph's semantics (TF1 resize, eps 1e-12)",
        ),
        Architecture(
            # The fast export graphs compute TF semantics, so only the strip executor (which follows the
            # module's semantics) speeds these up.
            "animeganv2-port", _v2("port"), ("torch", "strips"), has_strips=True, builds_from="weights",
            description="AnimeGANv2 with the PyTorch port's semantics (align_corners resize, eps 1e-5)",
        ),
        Architecture("animeganv1", _v1, ("torch", "compiled", "strips"), has_strips=True,
                     description="AnimeGAN v1"),
        Architecture("graph", _graph, ("torch", "compiled", "int8", "onnxruntime"), has_strips=True,
                     description="an imported graph (graph IR)"),
    )
}


def get_architecture(name: str) -> Architecture:
    try:
        return ARCHITECTURES[name]
    except KeyError:
        raise ValueError(f"unknown architecture {name!r}; known: {', '.join(ARCHITECTURES)}") from None
