"""Re-deriving constant Reshape shapes and ResizeBilinear sizes for input sizes a graph was not exported for.

TFLite (and some frozen graphs) bake the shapes of one input size into Reshape/ResizeBilinear constants, e.g.
AnimeGANv3's attention block reshapes ``[1,64,64,128] -> [1,1,4096,128]`` and back at 512x512. One run at the
reference size records each such node's input shape; at another size:

* ResizeBilinear keeps its ratio to its input (exported ``512 <- 256`` becomes ``2 * h``);
* Reshape is matched dimension group by dimension group against the reference: dims that pass through take
  the actual size, merged dims multiply (``64,64 -> 4096`` becomes ``h*w``, and the split ``(h, w)`` is
  remembered for this run), a split dim is divided as the same dims were merged earlier in the run
  (``4096 -> 64,64`` becomes ``h, w``). Leading batch dims map to the actual batch.

Anything else (a split that was never merged, an ambiguous regrouping) raises with the node's name.
"""

from __future__ import annotations

import math
from typing import Any

from torch import Tensor

from anipaint.networks.ir import Graph


class ShapeRebinder:
    def __init__(self, graph: Graph) -> None:
        self.reference_shape = _reference_shape(graph)  # logical NHWC
        # A graph exported with a dynamic input size (no reference shape) only holds constant shapes that hold
        # at every size (an ONNX export's [-1, 1, 1, C] next to its computed ones): nothing to re-target.
        self.const_nodes = {n.name for n in graph.nodes
                            if n.op in ("Reshape", "ResizeBilinear") and len(n.inputs) > 1
                            and n.inputs[1] in graph.consts} if self.reference_shape is not None else set()
        self.reference_in: dict[str, list[int]] | None = None  # node -> logical input shape at reference

    @property
    def reference_hw(self) -> tuple[int, int] | None:
        if self.reference_shape is None or not self.const_nodes:
            return None
        return self.reference_shape[1], self.reference_shape[2]

    def is_reference(self, x_nchw: Tensor) -> bool:
        """True when constant shapes hold as exported (or there are none)."""
        if not self.const_nodes:
            return True
        if self.reference_shape is None:
            return False
        n, _, h, w = x_nchw.shape
        return [n, h, w] == [self.reference_shape[0], self.reference_shape[1], self.reference_shape[2]]

    def needs_reference_run(self) -> bool:
        return bool(self.const_nodes) and self.reference_in is None

    def _ref(self, name: str) -> list[int]:
        if self.reference_shape is None:
            raise ValueError(f"{name}: constant shape and no reference input shape: fixed-size graph")
        if self.reference_in is None or name not in self.reference_in:
            raise RuntimeError(f"{name}: reference shapes not recorded")
        return self.reference_in[name]

    def resize(self, name: str, size: list[int], actual_in: list[int]) -> list[int]:
        ref_in = self._ref(name)
        return [_scale(actual_in[1 + i], ref_in[1 + i], size[i]) for i in range(2)]

    def reshape(self, name: str, shape: list[int], actual_in: list[int], memo: dict[Any, Any]) -> list[int]:
        ref_in = self._ref(name)
        if actual_in == ref_in:
            return shape
        ref_out = _resolve(shape, math.prod(ref_in))
        out = [1] * len(ref_out)
        if ref_in and ref_out and ref_in[0] == ref_out[0] == self.reference_shape[0]:  # type: ignore[index]
            out[0] = actual_in[0]  # the batch dim passes through
            start = 1
        else:
            start = 0
        in_nz = [i for i in range(start, len(ref_in)) if ref_in[i] != 1]
        out_nz = [j for j in range(start, len(ref_out)) if ref_out[j] != 1]
        if any(actual_in[i] != 1 for i in range(start, len(ref_in)) if ref_in[i] == 1):
            raise ValueError(f"{name}: cannot re-target reshape {ref_in}->{ref_out} for input {actual_in}")
        for gin, gout in _groups(in_nz, out_nz, ref_in, ref_out, name):
            ref_vals_in = tuple(ref_in[i] for i in gin)
            act_vals_in = tuple(actual_in[i] for i in gin)
            ref_vals_out = tuple(ref_out[j] for j in gout)
            if act_vals_in == ref_vals_in:
                vals: tuple[int, ...] = ref_vals_out
            elif len(gout) == 1:  # pass-through or merge
                vals = (math.prod(act_vals_in),)
                if len(gin) > 1:
                    memo[ref_vals_in] = act_vals_in
            elif len(gin) == 1 and ref_vals_out in memo:  # split as merged earlier in this run
                vals = memo[ref_vals_out]
            else:
                raise ValueError(f"{name}: cannot re-target reshape {ref_in}->{ref_out} for input {actual_in}")
            for j, v in zip(gout, vals, strict=True):
                out[j] = v
        if math.prod(out) != math.prod(actual_in):
            raise ValueError(f"{name}: re-targeted reshape {out} does not fit input {actual_in}")
        return out


def _reference_shape(graph: Graph) -> list[int] | None:
    shape = graph.meta.get("input_shape")
    if shape is None:
        for node in graph.nodes:
            if node.op == "Placeholder" and node.name == graph.inputs[0]:
                shape = node.attrs.get("shape")
    if shape is None or len(shape) != 4 or any(int(d) <= 0 for d in shape):
        return None
    return [int(d) for d in shape]


def _scale(actual: int, ref_in: int, ref_out: int) -> int:
    if ref_out % ref_in == 0:
        return actual * (ref_out // ref_in)
    if ref_in % ref_out == 0:
        return actual // (ref_in // ref_out)
    return round(actual * ref_out / ref_in)


def _resolve(shape: list[int], total: int) -> list[int]:
    if -1 not in shape:
        return list(shape)
    known = math.prod(d for d in shape if d != -1)
    return [total // known if d == -1 else d for d in shape]


def _groups(in_idx: list[int], out_idx: list[int], ref_in: list[int], ref_out: list[int],
            name: str) -> list[tuple[list[int], list[int]]]:
    """Pair runs of input dims with runs of output dims of equal product (the reshape's structure)."""
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(in_idx) and j < len(out_idx):
        gin, gout = [in_idx[i]], [out_idx[j]]
        pin, pout = ref_in[in_idx[i]], ref_out[out_idx[j]]
        i, j = i + 1, j + 1
        while pin != pout:
            if pin < pout and i < len(in_idx):
                gin.append(in_idx[i])
                pin *= ref_in[in_idx[i]]
                i += 1
            elif pout < pin and j < len(out_idx):
                gout.append(out_idx[j])
                pout *= ref_out[out_idx[j]]
                j += 1
            else:
                raise ValueError(f"{name}: reshape {ref_in}->{ref_out} has no dimension grouping")
        groups.append((gin, gout))
    if i != len(in_idx) or j != len(out_idx):
        raise ValueError(f"{name}: reshape {ref_in}->{ref_out} has no dimension grouping")
    return groups
