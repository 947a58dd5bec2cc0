"""A 2x upsampling and the one-pixel reflect pad after it, written as one pointwise loop over the padded output.

As the graph has them (TF1's asymmetric 2x upsampling, then ``MirrorPad`` REFLECT by one pixel), Inductor writes
the upsampling's four quarter pictures, interleaves them into a second buffer and pads that into a third: three
passes over the biggest activation of the network. The padded picture is itself an interleaving, of the source
with its first row / column reflected before it and its last one repeated after it: padded row ``2m`` is the
upsampling's odd row ``m - 1`` (row 1's for ``m = 0``), padded row ``2m + 1`` its even row ``m`` (the last one
again at the bottom). So each output value is one or two of the source's, chosen by the index's parity, which
Inductor writes as index arithmetic in one loop (no gather), storing the next convolution's input once.

The same values as upsampling then padding, except the pad's first row and column, where each odd value is the
same average taken the other way round (``b + (a - b) / 2`` for ``a + (b - a) / 2``): equal to float32 rounding.
"""

from __future__ import annotations

import torch
from torch import Tensor

from anipaint.networks.ir import Graph, Node

REFLECT_ONE = [0, 0, 1, 1, 1, 1, 0, 0]  # MirrorPad's NHWC paddings: one pixel on each side of H and W


def _half(a: Tensor, b: Tensor) -> Tensor:
    return a + (b - a) * 0.5  # TF1's weight 0.5 between a pixel and the next, in its order


def _interleave(even: Tensor, odd: Tensor, dim: int) -> Tensor:
    """``out[2k] = odd[k]``, ``out[2k + 1] = even[k]`` along ``dim``, as broadcasting and a parity select."""
    shape = list(even.shape)
    wide = [*shape[: dim + 1], 2, *shape[dim + 1 :]]
    parity = torch.arange(2, device=even.device).view([2] + [1] * (len(shape) - dim - 1)) == 1
    out = torch.where(parity, even.unsqueeze(dim + 1).expand(wide), odd.unsqueeze(dim + 1).expand(wide))
    shape[dim] *= 2
    return out.reshape(shape)


def padded_double(x: Tensor, stored_dtype: torch.dtype | None = None) -> Tensor:
    """TF1's 2x upsampling of NCHW ``x`` (held channels-last) reflect-padded by one pixel: (2H + 2) × (2W + 2)."""
    z = torch.cat([x[:, :, 1:2], x, x[:, :, -1:]], dim=2)
    z = torch.cat([z[:, :, :, 1:2], z, z[:, :, :, -1:]], dim=3).permute(0, 2, 3, 1)  # NHWC
    cols = _interleave(z[:, :, 1:], _half(z[:, :, :-1], z[:, :, 1:]), 2)  # columns first, then rows, as TF
    rows = _interleave(cols[:, 1:], _half(cols[:, :-1], cols[:, 1:]), 1)
    if stored_dtype is not None:
        rows = rows.to(stored_dtype)
    return rows.permute(0, 3, 1, 2)


def fusable(graph: Graph, resize: Node, pad: Node) -> bool:
    """Whether ``pad`` is a one-pixel reflect pad of ``resize``, a plain 2x-or-not upsampling read by it alone
    (the size is checked when it runs)."""
    if resize.op != "ResizeBilinear" or resize.attrs.get("align_corners") or resize.attrs.get("half_pixel_centers"):
        return False
    if pad.op != "MirrorPad" or str(pad.attrs.get("mode", "REFLECT")).upper() != "REFLECT":
        return False
    paddings = graph.consts.get(pad.inputs[1])
    if paddings is None or [int(v) for v in torch.as_tensor(paddings).reshape(-1).tolist()] != REFLECT_ONE:
        return False
    readers = [n for n in graph.nodes if resize.name in n.inputs]
    return readers == [pad]


def pairs(graph: Graph) -> dict[str, str]:
    """The fusable pads of a graph: pad node name → its upsampling's node name."""
    by_name = {n.name: n for n in graph.nodes}
    return {n.name: n.inputs[0] for n in graph.nodes
            if n.op == "MirrorPad" and n.inputs[0] in by_name and fusable(graph, by_name[n.inputs[0]], n)}
