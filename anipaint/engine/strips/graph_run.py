"""Run an imported graph over row strips with the whole picture's statistics: :class:`StripGraph`.

The plan (:mod:`.graph_plan`) says which values each loop computes and stores; this module computes them one strip
at a time: row-local ops through the graph executor's own op table (:data:`anipaint.networks.graph_exec.OPS`),
convolutions, paddings and resizes on just the rows a strip needs (reflected or zero rows at the picture's
edges, as the whole-picture ops pad), reductions over the positions as float64 sums across strips (a variance
from shifted sums and sums of squares; a softmax over positions from a running per-unit maximum and sum of
exponentials), and stored values as float16 rows in temporary files, freed after their last reader. Convolutions
run in bfloat16 where the CPU has it, everything else in float32.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from collections.abc import Callable
from math import prod
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from anipaint.engine.compile.precision import conv_dtype
from anipaint.engine.strips.executor import default_dtype
from anipaint.engine.strips.graph_plan import GraphPlan
from anipaint.engine.strips.row_sources import RowFile
from anipaint.engine.strips.rows import CONVS, PADS, RESHAPES, Tag, conv_rows, resize_rows
from anipaint.engine.strips.scratch import scratch_folder
from anipaint.engine.strips.strip_values import Accumulator, gather_rows, take_rows
from anipaint.networks import graph_exec
from anipaint.networks.graph_exec import Val
from anipaint.networks.graph_module import GraphModule
from anipaint.networks.graph_ops import resize_bilinear, same_padding

PLANS_KEPT = 4
Progress = Callable[[float], None]


try:  # glibc: strips of many sizes fragment the heap; hand the free pages back after each loop
    _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    _LIBC.malloc_trim.argtypes = [ctypes.c_size_t]
except (OSError, AttributeError):
    _LIBC = None


def _trim_heap() -> None:
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


class StripGraph:
    """An imported graph's module painted over row strips, exactly as one whole-picture pass computes it.

    Raises :class:`~anipaint.engine.strips.graph_plan.NoStripPlan` at construction for graphs with ops
    that can't run over strips.
    """

    def __init__(self, module: GraphModule, dtype: torch.dtype | None = None,
                 folder: str | Path | None = None) -> None:
        self.module = module
        self.graph = module.graph
        self.dtype = dtype or default_dtype()
        self.folder = folder
        m = module.size_multiple
        probe = GraphPlan(self.graph, 4 * m, 4 * m, self._shapes())  # validates the ops once
        self.layers = len(probe.loops)
        self.weights: dict[str, tuple[Tensor, Tensor | None, int]] = {}
        for name in probe.order:
            node = probe.nodes[name]
            if node.op in CONVS and probe.kind.get(name) == "spatial":
                self.weights[name] = self._weight(probe, node)
        self._plans: dict[tuple[int, int], GraphPlan] = {}
        self._lock = threading.Lock()
        # row-local ops never re-target shapes (the plan did, for reshapes and resizes, which run here by rows)
        self._ctx = graph_exec.Context(graph=self.graph, shapes=module.shapes, record=None, memo={},
                                       at_reference=True)

    def plan(self, height: int, width: int) -> GraphPlan:
        """The plan for a padded size (the last few sizes' plans are kept: making one runs the graph on meta)."""
        key = (height, width)
        with self._lock:
            plan = self._plans.pop(key, None)
        if plan is None:
            plan = GraphPlan(self.graph, height, width, self._shapes())
        with self._lock:
            self._plans[key] = plan  # most recent last
            while len(self._plans) > PLANS_KEPT:
                self._plans.pop(next(iter(self._plans)))
        return plan

    def _shapes(self):
        shapes = self.module.shapes
        if shapes.needs_reference_run():
            self.module.record_reference(torch.zeros(1))
        return shapes

    def _weight(self, plan: GraphPlan, node) -> tuple[Tensor, Tensor | None, int]:
        w = plan.value(node.inputs[1]).nhwc().float()  # HWIO, or HWCM for depthwise
        kh, kw = int(w.shape[0]), int(w.shape[1])
        if node.op == "Conv2D":
            weight, groups = w.permute(3, 2, 0, 1), plan.shape[node.inputs[0]][3] // int(w.shape[2])
        else:
            channels, mult = int(w.shape[2]), int(w.shape[3])
            weight, groups = w.permute(2, 3, 0, 1).reshape(channels * mult, 1, kh, kw), channels
        dtype = conv_dtype(weight, self.dtype)
        bias = plan.value(node.inputs[2]).t.reshape(-1).to(dtype) if len(node.inputs) > 2 else None
        return weight.to(dtype).contiguous(memory_format=torch.channels_last), bias, groups

    # ---- one paint --------------------------------------------------------------------------------------------

    def paint(self, rgb: np.ndarray, progress: Progress | None = None) -> np.ndarray:
        """RGB uint8 (H, W, 3) → painted RGB uint8, what one whole-picture pass of the module paints."""
        height, width = rgb.shape[:2]
        pad_h, pad_w = self.module.alignment(height, width)
        if pad_h or pad_w:
            mode = "reflect" if pad_h < height and pad_w < width else "edge"
            rgb = np.pad(rgb, ((0, pad_h), (0, pad_w), (0, 0)), mode=mode)
        plan = self.plan(rgb.shape[0], rgb.shape[1])
        out = np.empty((height, width, 3), np.uint8)
        with scratch_folder(self.folder, plan.scratch_bytes()) as tmp:
            run = _Run(self, plan, Path(tmp), rgb, out)
            try:
                for i, loop in enumerate(plan.loops):
                    done = None if progress is None else (lambda f, i=i: progress((i + f) / len(plan.loops)))
                    run.loop(i, loop, done)
            finally:
                run.release()
        if progress is not None:
            progress(1.0)
        return out


class _Run:
    """One paint's state: stored values, global values, accumulators."""

    def __init__(self, strips: StripGraph, plan: GraphPlan, folder: Path, rgb: np.ndarray,
                 out: np.ndarray) -> None:
        self.s, self.plan, self.folder, self.rgb, self.out = strips, plan, folder, rgb, out
        self.files: dict[str, RowFile] = {}
        self.globals: dict[str, Val] = {}
        self.softmax: dict[str, tuple[Tensor, Tensor]] = {}
        self.last_read = {n: i for i, loop in enumerate(plan.loops) for n in loop.reads}

    def release(self) -> None:
        for f in self.files.values():
            f.release()
        self.files.clear()

    # ---- loops ------------------------------------------------------------------------------------------------

    def loop(self, index: int, loop, progress: Progress | None = None) -> None:
        """Run one loop over its strips; ``progress`` gets the fraction of its rows done after each strip."""
        plan = self.plan
        for sink in loop.sinks:
            if sink in plan.stored:
                elems = prod(plan.shape[sink]) // plan.tag[sink].height
                self.files[sink] = RowFile(self.folder, f"{index:03d}-{len(self.files):03d}", plan.tag[sink].height,
                                           elems)
        accs: dict[tuple, Accumulator] = {}  # one per value and axes: its means and variances share the sums
        mine = {n: r for n, r in plan.reductions.items() if n in plan.live and r.source in loop.sinks}
        for name, r in mine.items():
            acc = accs.setdefault((r.source, r.axes, r.kind == "softmax" and name), Accumulator(r))
            acc.squares |= r.kind == "variance"
        for r0 in range(0, loop.height, loop.rows):
            r1 = min(loop.height, r0 + loop.rows)
            need = plan.requirements(loop.nodes, loop.sinks, r0, r1)
            memo: dict[str, tuple[int, Val]] = {}
            for name in [*loop.reads, *loop.nodes]:
                if name in need:
                    lo, hi = need[name]
                    value = self.read(name, lo, hi) if name in loop.reads else self.compute(name, lo, hi, memo)
                    memo[name] = (lo, value)
            for sink in loop.sinks:
                lo, value = memo[sink]
                strip = take_rows(value, plan.tag[sink], r0 - lo, r1 - r0)
                if sink in self.files:
                    self.write(sink, r0, strip)
                for key, acc in accs.items():
                    if key[0] == sink:
                        acc.add(strip)
                if sink == plan.output:
                    self.paint_rows(r0, r1, strip)
            if progress is not None:
                progress(r1 / loop.height)
        for name, r in mine.items():
            result = accs[(r.source, r.axes, r.kind == "softmax" and name)].result(r)
            if r.kind == "softmax":
                self.softmax[name] = result
            else:
                self.globals[name] = result
        self.derive_globals()
        for name, last in self.last_read.items():
            if last == index and name in self.files:
                self.files.pop(name).release()
        _trim_heap()

    def derive_globals(self) -> None:
        plan = self.plan
        for name in plan.order:
            if plan.kind.get(name) != "global" or name in self.globals or name in plan.reductions:
                continue
            if all(d in self.globals for d in plan.deps[name]):
                node = plan.nodes[name]
                args = [self.globals[i] if i in self.globals else plan.value(i) for i in node.inputs]
                if node.op in RESHAPES:  # to the shape the plan worked out (constant shapes re-targeted there)
                    self.globals[name] = Val(args[0].nhwc().reshape(plan.shape[name]), False)
                else:
                    self.globals[name] = graph_exec.OPS[node.op](self.s._ctx, node, args)

    # ---- stored rows and the picture --------------------------------------------------------------------------

    def _canonical(self, name: str) -> tuple[list[int], list[int]]:
        """Permutation that brings a value's rows to the front (rows, columns, rest) and its inverse."""
        tag, rank = self.plan.tag[name], len(self.plan.shape[name])
        front = [tag.axis] if tag.flat else [tag.axis, tag.axis + 1]
        perm = front + [a for a in range(rank) if a not in front]
        return perm, [perm.index(a) for a in range(rank)]

    def write(self, name: str, r0: int, strip: Val) -> None:
        perm, _ = self._canonical(name)
        self.files[name].write(r0, strip.nhwc().permute(perm).to(torch.float16))

    def read(self, name: str, lo: int, hi: int) -> Val:
        plan = self.plan
        tag = plan.tag[name]
        if name == plan.input:
            x = torch.from_numpy(self.rgb[lo:hi].copy()).float().div_(127.5).sub_(1.0)
            return Val(x.unsqueeze(0).permute(0, 3, 1, 2), True)  # channels-last NCHW view
        perm, inverse = self._canonical(name)
        shape = list(plan.shape[name])
        if tag.flat:
            shape[tag.axis] = (hi - lo) * tag.width
        else:
            shape[tag.axis] = hi - lo
        canonical = [shape[a] for a in perm]
        x = torch.from_numpy(self.files[name].read(lo, hi)).float().view(canonical).permute(inverse)
        if x.dim() == 4 and not tag.flat and tag.axis == 1:
            return Val(x.permute(0, 3, 1, 2), True)
        return Val(x, False)

    def paint_rows(self, r0: int, r1: int, strip: Val) -> None:
        rows = min(r1, self.out.shape[0]) - r0
        if rows <= 0:
            return
        y = strip.nhwc()[0, :rows, : self.out.shape[1]].clamp(-1.0, 1.0).add(1.0).mul(127.5).round()
        self.out[r0 : r0 + rows] = y.to(torch.uint8).numpy()

    # ---- ops on strips ----------------------------------------------------------------------------------------

    def compute(self, name: str, lo: int, hi: int, memo: dict[str, tuple[int, Val]]) -> Val:
        plan = self.plan
        node = plan.nodes[name]
        index = plan.needs(name, lo, hi)

        def arg(i: str, fill: float | None = None) -> Val:
            if i in index:
                dep_lo, value = memo[i]
                return self._gather(value, plan.tag[i], index[i], dep_lo, fill)
            if i in self.globals:
                return self.globals[i]
            return plan.value(i)

        op, tag = node.op, plan.tag[name]
        if op in CONVS:
            return self._conv(node, arg(node.inputs[0], 0.0), tag)
        if op in PADS and not tag.flat:
            pads = plan.value(node.inputs[1]).t.clone()
            pads[1] = 0  # the rows were padded by gathering them
            fill = float(plan.value(node.inputs[2]).t.reshape(-1)[0]) if len(node.inputs) > 2 else 0.0
            args = [arg(node.inputs[0], fill), Val(pads, False), *[arg(i) for i in node.inputs[2:]]]
            return graph_exec.OPS[op](self.s._ctx, node, args)
        if op == "ResizeBilinear":
            return self._resize(node, lo, hi, memo)
        if op in RESHAPES:
            shape = list(plan.shape[name])
            shape[tag.axis] = (hi - lo) * (tag.width if tag.flat else 1)
            return Val(arg(node.inputs[0]).nhwc().reshape(shape), False)
        if name in plan.reductions:  # a softmax over the positions, with the whole picture's statistics
            peak, total = self.softmax[name]
            x = arg(node.inputs[0]).nhwc()
            x = x * plan.reductions[name].beta if plan.reductions[name].beta != 1.0 else x
            return Val(torch.exp(x - peak).div_(total), False)
        return graph_exec.OPS[op](self.s._ctx, node, [arg(i) for i in node.inputs])

    def _gather(self, value: Val, tag: Tag, index: np.ndarray, lo: int, fill: float | None) -> Val:
        """Rows ``index`` (absolute) of a computed strip starting at row ``lo``; out-of-range rows are ``fill``."""
        before = int(np.sum(index < 0))
        after = int(np.sum(index >= tag.height))
        if before == after == 0 or fill is None:
            return gather_rows(value, tag, index - lo)
        inner = gather_rows(value, tag, index[before : len(index) - after] - lo)
        x = inner.nchw()
        x = F.pad(x, (0, 0, before, after), value=fill)  # rows are dim 2 of a picture-shaped NCHW value
        return Val(x, True)

    def _conv(self, node, x: Val, tag: Tag) -> Val:
        weight, bias, groups = self.s.weights[node.name]
        _, _, stride, dilation, _ = conv_rows(self.plan, node)
        kw = weight.shape[-1]
        strides = [int(s) for s in node.attrs.get("strides", [1, 1, 1, 1])]
        dilations = [int(d) for d in node.attrs.get("dilations", [1, 1, 1, 1])]
        padding = node.attrs.get("padding", "VALID")
        t = x.nchw()
        if padding == "SAME":
            left, right = same_padding(t.shape[3], kw, strides[2], dilations[2])
        elif padding == "EXPLICIT":
            left, right = (int(p) for p in node.attrs["explicit_paddings"][4:6])
        else:
            left = right = 0
        t = t.to(weight.dtype, memory_format=torch.channels_last)
        if left != right:
            t, left = F.pad(t, (left, right)), 0
        with torch.inference_mode():
            y = F.conv2d(t, weight, bias, (stride, strides[2]), (0, left), (dilation, dilations[2]), groups)
        return Val(y.float(), True)

    def _resize(self, node, lo: int, hi: int, memo: dict[str, tuple[int, Val]]) -> Val:
        src = node.inputs[0]
        dep_lo, value = memo[src]
        align, half = bool(node.attrs.get("align_corners", False)), bool(node.attrs.get("half_pixel_centers", False))
        x = value.nchw()
        height, width = self.plan.shape[node.name][1:3]
        if height == 2 * self.plan.shape[src][1] and not align and not half:
            # TF1 doubling: the strip's rows doubled as a picture of their own are the picture's rows (the
            # strip's last odd row, which would pair with the next strip, is never asked for but at the bottom)
            up = resize_bilinear(x, (2 * x.shape[2], width))
            return Val(up.narrow(2, lo - 2 * dep_lo, hi - lo), True)
        r_lo, r_hi, frac = resize_rows(self.plan, node)
        cols = resize_bilinear(x, (x.shape[2], width), align, half).permute(0, 2, 3, 1)  # rows then whole pixels
        top = cols.index_select(1, torch.from_numpy(r_lo[lo:hi] - dep_lo))
        bottom = cols.index_select(1, torch.from_numpy(r_hi[lo:hi] - dep_lo))
        weight = torch.from_numpy(frac[lo:hi]).view(1, -1, 1, 1)
        return Val((top + (bottom - top) * weight).permute(0, 3, 1, 2), True)
