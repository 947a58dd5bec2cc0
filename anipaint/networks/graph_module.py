"""Run an imported :class:`~anipaint.networks.ir.Graph` with torch: :class:`GraphModule`.

The graph speaks TensorFlow (NHWC). Feature maps are kept in torch's NCHW inside, each value carrying a flag
saying whether its tensor is the NCHW permutation of the logical NHWC value; layout-free ops (convolutions,
padding, resizing, element-wise maths, per-channel means) work on NCHW directly, and a value is permuted to
its logical NHWC form only where an op needs the real layout (Reshape, Transpose, Shape-driven slicing, ...).
The input arrives NCHW and the output leaves NCHW, so a plain conv net never permutes at all.

Shape arithmetic (Shape, StridedSlice, Pack, FloorDiv, ...) is evaluated on the actual input, so graphs that
derive their sizes from the input run at any size. Graphs whose Reshape/ResizeBilinear carry *constant* shapes
(TFLite exports are tied to one input size) are re-targeted: the constants are re-derived for the actual
size from the shapes seen on one run at the graph's reference size (see :mod:`.graph_shapes`).

Any input size: the input is reflect-padded at the bottom/right to a multiple of the graph's total stride
(product of the strided convolutions on the deepest path: 4 for AnimeGAN v1, 8 for v3) and the output cropped
back. Without that, odd sizes make TF's "floor(x/2)" downsampling and "2x" upsampling disagree and the skip
additions fail (v3) or the output comes out smaller than the input (v1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from anipaint.networks import graph_exec
from anipaint.networks.graph_exec import Val
from anipaint.networks.graph_shapes import ShapeRebinder
from anipaint.networks.ir import Graph
from anipaint.networks.padding import alignment_padding, pad_to_multiple

CONV_OPS = {"Conv2D", "DepthwiseConv2dNative"}


class GraphModule(nn.Module):
    """An imported graph as a torch module: ``forward(x: [N,3,H,W] in [-1,1]) -> [N,3,H,W] in [-1,1]``.

    Constants become parameters (floats, ``requires_grad=False``) or buffers (integers), so ``state_dict()``,
    ``.to()`` and ``.half()`` work; their keys are the graph's constant names.
    """

    def __init__(self, graph: Graph) -> None:
        super().__init__()
        unknown = sorted({n.op for n in graph.nodes} - set(graph_exec.OPS) - {"Placeholder", "Const"})
        if unknown:
            raise NotImplementedError(f"graph ops not supported by GraphModule: {', '.join(unknown)}")
        if len(graph.inputs) != 1:
            raise ValueError(f"GraphModule runs single-input graphs; this one has {graph.inputs}")
        self.graph = graph
        self._keys: dict[str, str] = {}
        for name, value in graph.consts.items():
            key = name.replace(".", "_") or "const"
            while hasattr(self, key) or key in self._keys.values():
                key = "c_" + key
            tensor = torch.from_numpy(np.array(value))  # a copy: the module owns its weights
            if tensor.is_floating_point():
                self.register_parameter(key, nn.Parameter(tensor.float(), requires_grad=False))
            else:
                self.register_buffer(key, tensor.long())
            self._keys[name] = key
        self.size_multiple = int(graph.meta.get("size_multiple") or total_stride(graph))
        self.shapes = ShapeRebinder(graph)

    # -------------------------------------------------------------------------------------------- API

    @classmethod
    def from_file(cls, path: Path | str) -> GraphModule:
        """Load an artefact written by :func:`save_graph`."""
        data = torch.load(Path(path), map_location="cpu", weights_only=True)
        return cls(Graph.from_dict(data))

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 4:
            raise ValueError(f"expected NCHW input, got shape {tuple(x.shape)}")
        h, w = x.shape[-2:]
        if self.shapes.reference_hw == (h, w):
            return self.run(x)  # the size the graph was exported for needs no alignment
        out = self.run(pad_to_multiple(x, self.size_multiple, min_cells=2))
        return out[..., :h, :w]

    def alignment(self, h: int, w: int) -> tuple[int, int]:
        """Rows and columns ``forward`` adds at the bottom and right of an ``h`` x ``w`` input."""
        if self.shapes.reference_hw == (h, w):
            return 0, 0
        return alignment_padding(h, w, self.size_multiple, min_cells=2)

    def run(self, x: Tensor, outputs: list[str] | None = None) -> Tensor:
        """Execute the graph on an NCHW tensor as is (no alignment padding); the first output, NCHW."""
        values = self.execute(x, outputs)
        return values[0].nchw()

    def execute(self, x: Tensor, outputs: list[str] | None = None, record: dict[str, Any] | None = None
                ) -> list[Val]:
        """Run the nodes in order; return the requested values (default: the graph outputs)."""
        graph = self.graph
        wanted = outputs or graph.outputs
        at_reference = self.shapes.is_reference(x)
        if not at_reference and record is None and self.shapes.needs_reference_run():
            self.record_reference(x)
        env: dict[str, Val] = {graph.inputs[0]: Val(x, True)}
        ctx = graph_exec.Context(graph=graph, shapes=self.shapes, record=record, memo={},
                                 at_reference=at_reference)
        last_use = self._last_use(wanted)
        for idx, node in enumerate(graph.nodes):
            if node.op in ("Placeholder", "Const"):  # Const values are looked up by name
                continue
            args = [env[i] if i in env else Val(self._const(i), False) for i in node.inputs]
            env[node.name] = graph_exec.OPS[node.op](ctx, node, args)
            for i in node.inputs:  # free activations nobody needs any more (peak memory at large sizes)
                if last_use.get(i) == idx and i not in wanted:
                    env.pop(i, None)
        return [env[o] if o in env else Val(self._const(o), False) for o in wanted]

    # ---------------------------------------------------------------------------------------- helpers

    def record_reference(self, like: Tensor) -> None:
        """One run at the exported size, recording the inputs of constant-shaped nodes (once per module)."""
        ref = self.shapes.reference_shape
        if ref is None:
            raise ValueError("graph has constant shapes but no reference input shape: it runs at one size only")
        record: dict[str, Any] = {}
        with torch.no_grad():
            probe = torch.zeros(ref[0], ref[3], ref[1], ref[2], dtype=like.dtype, device=like.device)
            self.execute(probe, record=record)
        self.shapes.reference_in = record

    def _const(self, name: str) -> Tensor:
        try:
            return getattr(self, self._keys[name])
        except KeyError:
            raise KeyError(f"graph value {name!r} is neither computed before use nor a constant") from None

    def _last_use(self, wanted: list[str]) -> dict[str, int]:
        cache = getattr(self, "_last_use_cache", None)
        if cache is not None and cache[0] == wanted:
            return cache[1]
        last: dict[str, int] = {}
        for idx, node in enumerate(self.graph.nodes):
            for i in node.inputs:
                last[i] = idx
        self._last_use_cache = (list(wanted), last)
        return last


def total_stride(graph: Graph) -> int:
    """Largest product of convolution strides on any path from the input: the size alignment needed."""
    factor: dict[str, int] = {name: 1 for name in graph.inputs}
    best = 1
    for node in graph.nodes:
        f = max((factor.get(i, 1) for i in node.inputs), default=1)
        if node.op in CONV_OPS:
            strides = node.attrs.get("strides", [1, 1, 1, 1])
            f *= max(int(s) for s in strides[1:3])
        factor[node.name] = f
        best = max(best, f)
    return best


def save_graph(graph: Graph, path: Path | str) -> None:
    """Write a graph artefact (plain containers + tensors; loads with ``torch.load(weights_only=True)``)."""
    torch.save(graph.to_dict(), Path(path))
