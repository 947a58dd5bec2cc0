"""Values of a graph run in strips a strip at a time: rows taken from a strip, and the sums over every strip that give
a graph's whole-picture statistics (:class:`Reduction`, accumulated by :class:`Accumulator`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from anipaint.engine.strips.rows import Tag
from anipaint.networks.graph_exec import Val

_NCHW = (0, 2, 3, 1)  # logical NHWC axis -> NCHW tensor dim


@dataclass
class Reduction:
    """A global value accumulated over strips of ``source``: ``Mean``/``Sum`` over ``axes``, a variance, or
    softmax statistics (per-unit maximum and sum of exponentials over the positions)."""

    kind: str  # "sum" | "mean" | "variance" | "softmax"
    source: str
    axes: tuple[int, ...]
    keep: bool
    count: int  # elements summed per output element
    beta: float = 1.0


def _dim(val: Val, axis: int) -> int:
    return _NCHW[axis] if val.is_nchw else axis


def take_rows(val: Val, tag: Tag, start: int, count: int) -> Val:
    """Rows ``start … start + count - 1`` of a strip (relative to the strip's first row), as a view."""
    d = _dim(val, tag.axis)
    if tag.flat:
        return Val(val.t.narrow(d, start * tag.width, count * tag.width), val.is_nchw)
    return Val(val.t.narrow(d, start, count), val.is_nchw)


def gather_rows(val: Val, tag: Tag, index: np.ndarray) -> Val:
    """Rows ``index`` (relative to the strip's first row) of a strip: a view when they are consecutive."""
    if len(index) and index[-1] - index[0] == len(index) - 1 and np.all(np.diff(index) == 1):
        return take_rows(val, tag, int(index[0]), len(index))
    d = _dim(val, tag.axis)
    rows = torch.from_numpy(index.astype(np.int64))
    if tag.flat:
        rows = (rows[:, None] * tag.width + torch.arange(tag.width)).reshape(-1)
    return Val(val.t.index_select(d, rows), val.is_nchw)


class Accumulator:
    """Sums over the positions of one value, strip by strip (float32 within a strip, float64 across): sums and
    sums of squares for its means and variances, or a softmax's running per-unit maximum and sum of exponentials."""

    def __init__(self, reduction: Reduction) -> None:
        self.axes, self.softmax, self.beta = list(reduction.axes), reduction.kind == "softmax", reduction.beta
        self.squares = False
        self.total: Tensor | None = None
        self.total_sq: Tensor | None = None
        self.peak: Tensor | None = None

    def add(self, val: Val) -> None:
        x, axes = val.nhwc(), self.axes
        if self.softmax:
            x = x.float() * self.beta if self.beta != 1.0 else x.float()
            peak = x.amax(dim=axes, keepdim=True).double()
            if self.total is None:
                self.peak, self.total = peak, torch.zeros_like(peak)
            new = torch.maximum(self.peak, peak)
            self.total = self.total * torch.exp(self.peak - new) + torch.exp(x - new.float()).sum(axes, True).double()
            self.peak = new
            return
        part = x.sum(axes, keepdim=True, dtype=torch.float32).double()
        self.total = part if self.total is None else self.total + part
        if self.squares:
            part = x.float().square().sum(axes, keepdim=True).double()
            self.total_sq = part if self.total_sq is None else self.total_sq + part

    def result(self, reduction: Reduction) -> Val | tuple[Tensor, Tensor]:
        """One reduction's value (logical layout), or for a softmax its (maximum, sum of exponentials)."""
        if self.softmax:
            return self.peak.float(), self.total.float()
        n = reduction.count
        if reduction.kind == "sum":
            out = self.total
        elif reduction.kind == "mean":
            out = self.total / n
        else:
            mean = self.total / n
            out = (self.total_sq / n - mean * mean).clamp(min=0.0)
        out = out.float()
        if not reduction.keep:
            out = out.squeeze(list(reduction.axes)) if reduction.axes else out
        return Val(out, False)
