"""How an imported graph (:class:`~anipaint.networks.ir.Graph`) runs over row strips: the plan.

Every value of the graph is one of three kinds:

* **spatial**: it depends on the picture and keeps its positions (feature maps, and the attention block's
  ``[N, positions, units]`` reshapes of them). Rows are the unit of the strips: a :class:`Tag` says which axis
  holds the rows (``[.., H, W, ..]``) or the row-major positions (``[.., H*W, ..]``) of a value.
* **global**: what an op that reduces over the positions (``Mean``/``Sum`` over H and W: the instance and
  layer norms' moments) computes, and anything computed from such results alone. Per-channel sums are
  accumulated over all strips, so they are the whole picture's.
* **static**: constants, and shape arithmetic on the picture's full size, worked out once by running the graph
  on the meta device (no data).

A spatial op that needs a global value can only run once every strip has been seen: it runs in a later
**pass**. Each value's pass is the number of such barriers before it; a positional ``Softmax`` (the external
attention's softmax over positions) is a barrier of its own: per-unit maximum and sum of exponentials are
accumulated over all strips of its input in one pass and the softmax is applied in the next. The pattern
``Mean(SquaredDifference(x, Mean(x)))`` (TF's ``moments``) is recognised, so a variance is accumulated in the
same pass as its mean instead of a pass later. Spatial values read in a later pass than their own are
**stored** (float16 rows in temporary files); everything else is recomputed from stored values on the fly.
Within a pass, **loops** run over the strips of one row space; a value whose rows are needed with a halo (by a
3x3 convolution) by a later value of the same pass is stored by an earlier loop and read back by a later one.

Ops this can't stream (a shape-dependent slice of a feature map, a reduction over rows only, ...) raise
:class:`NoStripPlan` with the op's name when the plan is made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

import numpy as np
import torch

from anipaint.engine.strips.rows import (
    CONVS,
    PADS,
    POINTWISE,
    REDUCTIONS,
    RESHAPES,
    NoStripPlan,
    Tag,
    conv_rows,
    is_pointwise_conv,
    meta_shortcut,
    mirror,
    reshaped,
    resize_rows,
)
from anipaint.engine.strips.strip_values import Reduction
from anipaint.networks import graph_exec
from anipaint.networks.graph_exec import Val
from anipaint.networks.ir import Graph, Node

STRIP_BYTES = 4 << 20  # float32 rows of the widest value per strip: small strips stay in cache
MIN_STRIP_ROWS = 8


@dataclass
class Loop:
    """One sweep over the strips of one row space: the values it computes (in order) and what it yields."""

    height: int
    sinks: list[str] = field(default_factory=list)  # values computed for exactly the strip's rows
    nodes: list[str] = field(default_factory=list)  # every value it computes, topological order
    reads: set[str] = field(default_factory=set)  # stored values (or the picture) it reads
    rows: int = 8  # strip height


class GraphPlan:
    """The passes and loops that run ``graph`` on a padded ``height`` x ``width`` picture."""

    def __init__(self, graph: Graph, height: int, width: int, shapes=None) -> None:
        self.graph = graph
        self.height, self.width = height, width
        self.nodes = {n.name: n for n in graph.nodes}
        self.order = [n.name for n in graph.nodes if n.op not in ("Placeholder", "Const")]
        self.input = graph.inputs[0]
        if len(graph.outputs) != 1:
            raise NoStripPlan("the strip executor paints graphs with one output")
        self.output = graph.outputs[0]
        self.static: dict[str, Val] = {}
        self.shape: dict[str, list[int]] = {}
        self._meta_run(shapes)
        self.kind: dict[str, str] = {self.input: "spatial"}
        self.tag: dict[str, Tag] = {self.input: Tag(1, False, height, width)}
        self.reductions: dict[str, Reduction] = {}
        self.deps: dict[str, list[str]] = {}  # non-static inputs, after the variance rewrite
        self._classify()
        self.level: dict[str, int] = {}
        self._levels()
        self.live = self._live()
        self.consumers: dict[str, list[str]] = {}
        for name in self.order:
            if name in self.live:
                for dep in self.deps[name]:
                    self.consumers.setdefault(dep, []).append(name)
        self.stored = {n for n in self.live if self.kind.get(n) == "spatial" and n != self.input
                       and any(self.kind[c] == "spatial" and self.level[c] > self.level[n]
                               for c in self.consumers.get(n, []))}
        self.loops = self._loops()

    # ---- shapes and static values: one run on the meta device -----------------------------------------------

    def _meta_run(self, shapes) -> None:
        graph = self.graph
        env: dict[str, Val] = {self.input: Val(torch.empty(1, 3, self.height, self.width, device="meta"), True)}
        ctx = graph_exec.Context(graph=graph, shapes=shapes, record=None, memo={},
                                 at_reference=shapes is None or shapes.is_reference(env[self.input].t))
        for name in self.order:
            node = self.nodes[name]
            args = [env[i] if i in env else Val(torch.from_numpy(np.array(graph.consts[i])), False)
                    for i in node.inputs]
            meta = any(a.t.is_meta for a in args)
            if meta:  # weights and biases join the meta tensors
                args = [Val(a.t.to("meta"), a.is_nchw) if a.t.is_floating_point() and a.t.dim() > 0 else a
                        for a in args]
            try:
                value = meta_shortcut(node, args) if meta else None
                if value is None:
                    value = graph_exec.OPS[node.op](ctx, node, args)
            except (KeyError, NotImplementedError, RuntimeError, ValueError) as exc:
                raise NoStripPlan(f"{node.op} {name}: {exc}") from exc
            env[name] = value
            self.shape[name] = list(value.nhwc().shape)
            if not value.t.is_meta:
                self.static[name] = value
        self.shape[self.input] = [1, self.height, self.width, 3]

    def value(self, name: str) -> Val:
        """A static value: a constant or worked-out shape arithmetic."""
        if name in self.static:
            return self.static[name]
        return Val(torch.from_numpy(np.array(self.graph.consts[name])), False)

    def is_static(self, name: str) -> bool:
        return name in self.graph.consts or name in self.static

    # ---- kinds, tags, the variance rewrite ---------------------------------------------------------------------

    def _axes(self, node: Node, rank: int) -> tuple[int, ...]:
        axes = self.value(node.inputs[1]).ints() if len(node.inputs) > 1 else list(range(rank))
        return tuple(sorted({a % rank for a in axes}))

    def _classify(self) -> None:
        for name in self.order:
            node = self.nodes[name]
            deps = [i for i in node.inputs if not self.is_static(i)]
            kinds = {self.kind[i] for i in deps}
            self.deps[name] = deps
            if name in self.static:
                self.kind[name] = "static"
            elif "spatial" in kinds:
                self.kind[name] = self._spatial(node, [i for i in deps if self.kind[i] == "spatial"])
            elif kinds:
                self.kind[name] = "global"
            else:
                raise NoStripPlan(f"{node.op} {name}: a value that is neither static nor computed")

    def _spatial(self, node: Node, sources: list[str]) -> str:
        """Kind of a node with spatial inputs; records its tag, or its reduction when it is a barrier."""
        name, op = node.name, node.op
        tags = {self.tag[s] for s in sources}
        if len(tags) != 1:
            raise NoStripPlan(f"{op} {name}: inputs laid out differently")
        tag = tags.pop()
        src = sources[0]
        rank, out = len(self.shape[src]), self.shape[name]
        if op in REDUCTIONS:
            axes = self._axes(node, rank)
            keep = bool(node.attrs.get("keep_dims", False))
            if tag.positions() <= set(axes):
                count = prod(self.shape[src][a] for a in axes)
                reduction = Reduction("mean" if op == "Mean" else "sum", src, axes, keep, count)
                self._moments(node, reduction)
                self.reductions[name] = reduction
                return "global"
            if tag.positions() & set(axes):
                raise NoStripPlan(f"{op} {name}: a reduction over some of the positions only")
            shift = 0 if keep else sum(1 for a in axes if a < tag.axis)
            self.tag[name] = Tag(tag.axis - shift, tag.flat, tag.height, tag.width)
        elif op == "Softmax":
            if rank - 1 in tag.positions():
                if not tag.flat:
                    raise NoStripPlan(f"{op} {name}: softmax over picture columns")
                count = tag.height * tag.width
                beta = float(node.attrs.get("beta", 1.0))
                self.reductions[name] = Reduction("softmax", src, (rank - 1,), True, count, beta)
            self.tag[name] = tag
        elif op in POINTWISE or op == "ConcatV2":
            if len(out) != rank:
                raise NoStripPlan(f"{op} {name}: broadcasting changes the rank of a feature map")
            if op == "ConcatV2" and self.value(node.inputs[-1]).scalar() % rank in tag.positions():
                raise NoStripPlan(f"{op} {name}: concatenation along the positions")
            self.tag[name] = tag
        elif op == "Split":
            if self.value(node.inputs[0]).scalar() % rank in tag.positions():
                raise NoStripPlan(f"{op} {name}: a split along the positions")
            self.tag[name] = tag
        elif op in RESHAPES:
            self.tag[name] = reshaped(tag, self.shape[src], out, name)
        elif op == "Transpose":
            perm = self.value(node.inputs[1]).ints()
            first = perm.index(tag.axis)
            if not tag.flat and (first + 1 >= len(perm) or perm[first + 1] != tag.axis + 1):
                raise NoStripPlan(f"{op} {name}: rows and columns transposed apart")
            self.tag[name] = Tag(first, tag.flat, tag.height, tag.width)
        elif op in CONVS or op in PADS or op == "ResizeBilinear":
            if tag.flat or tag.axis != 1 or rank != 4:
                if not (op in CONVS and is_pointwise_conv(node, self.value(node.inputs[1]).t)):
                    raise NoStripPlan(f"{op} {name}: not on a picture-shaped feature map")
                self.tag[name] = tag
            else:
                self.tag[name] = Tag(1, False, out[1], out[2])
        else:
            raise NoStripPlan(f"{op} {name}: no strip version of this op")
        return "spatial"

    def _moments(self, node: Node, reduction: Reduction) -> None:
        """``Mean(SquaredDifference(x, Mean(x)))`` (or ``Mean(Square(x - Mean(x)))``) over the same axes: a
        variance, accumulated in the same pass as the mean."""
        diff = self.nodes.get(reduction.source)
        if diff is not None and diff.op == "Square" and self.nodes.get(diff.inputs[0], diff).op == "Sub":
            diff = self.nodes[diff.inputs[0]]  # Mean(Square(x - Mean(x))): the same, written out
            pairs = [tuple(diff.inputs)]
        elif diff is not None and diff.op == "SquaredDifference":
            pairs = [tuple(diff.inputs), tuple(diff.inputs[::-1])]
        else:
            return
        if reduction.kind != "mean":
            return
        for x, m in pairs:
            mean = self.reductions.get(m)
            if mean is not None and mean.kind == "mean" and mean.source == x and mean.axes == reduction.axes \
                    and mean.keep:
                reduction.kind, reduction.source = "variance", x
                self.deps[node.name] = [x]
                return

    # ---- passes, liveness, storage, loops ----------------------------------------------------------------------

    def _levels(self) -> None:
        ready: dict[str, int] = {}  # global value -> pass in which it becomes known
        self.level[self.input] = 0
        for name in self.order:
            kind = self.kind[name]
            if kind == "static":
                continue
            deps = self.deps[name]
            if name in self.reductions:
                source = self.reductions[name].source
                if self.reductions[name].kind == "softmax":
                    self.level[name] = self.level[source] + 1
                    continue
                ready[name] = self.level[source]
            elif kind == "global":
                ready[name] = max(ready[d] for d in deps)
            else:
                self.level[name] = max([self.level[d] for d in deps if self.kind[d] == "spatial"]
                                       + [ready[d] + 1 for d in deps if self.kind[d] == "global"])
        self.ready = ready

    def _live(self) -> set[str]:
        live, todo = set(), [self.output]
        while todo:
            name = todo.pop()
            if name in live or self.kind.get(name, "static") == "static":
                continue
            live.add(name)
            todo.extend(self.deps.get(name, []))
        if self.kind.get(self.output) != "spatial" or self.tag[self.output] != Tag(1, False, self.height, self.width):
            raise NoStripPlan("the output is not a picture of the input's size")
        return live

    def _sinks(self) -> list[str]:
        sources = {r.source for n, r in self.reductions.items() if n in self.live}
        return [n for n in self.order if n in self.live and self.kind[n] == "spatial"
                and (n in self.stored or n in sources or n == self.output)]

    def needs(self, name: str, lo: int, hi: int) -> dict[str, np.ndarray]:
        """Rows of each spatial input (indices into it; out-of-range ones are padding) for rows lo..hi of name."""
        node = self.nodes[name]
        rows = np.arange(lo, hi)
        out: dict[str, np.ndarray] = {}
        for dep in self.deps[name]:
            if self.kind[dep] != "spatial":
                continue
            tag = self.tag[dep]
            if node.op in PADS and not tag.flat:
                index = rows - self.value(node.inputs[1]).ints()[2 * tag.axis]
                if node.op == "MirrorPad":  # rows beyond the edges are reflected ones; Pad's are constant
                    index = mirror(index, tag.height, str(node.attrs.get("mode", "REFLECT")))
                out[dep] = index
            elif node.op in CONVS and not tag.flat:
                _, k, stride, dilation, top = conv_rows(self, node)
                out[dep] = np.arange(lo * stride - top, (hi - 1) * stride - top + (k - 1) * dilation + 1)
            elif node.op == "ResizeBilinear":
                r_lo, r_hi, _ = resize_rows(self, node)
                out[dep] = np.union1d(r_lo[lo:hi], r_hi[lo:hi])
            else:
                out[dep] = rows
        return out

    def requirements(self, loop_nodes: list[str], sinks: list[str], r0: int, r1: int) -> dict[str, tuple[int, int]]:
        """Rows (lo, hi) of every value a loop computes or reads for its strip ``r0 … r1 - 1`` (topological
        ``loop_nodes``): what the strip's own rows need, halos and reflected edges included."""
        need = {s: (r0, r1) for s in sinks}
        for name in reversed(loop_nodes):
            if name not in need:
                continue
            for dep, rows in self.needs(name, *need[name]).items():
                valid = rows[(rows >= 0) & (rows < self.tag[dep].height)]
                if len(valid) == 0:
                    valid = np.array([0])
                lo, hi = int(valid.min()), int(valid.max()) + 1
                if dep in need:
                    lo, hi = min(lo, need[dep][0]), max(hi, need[dep][1])
                need[dep] = (lo, hi)
        return need

    def _subgraph(self, sinks: list[str], available: set[str]) -> tuple[set[str], set[str]]:
        """Values a loop computes for ``sinks`` and the stored values it reads (``available`` ones)."""
        nodes, reads, todo = set(), set(), list(sinks)
        while todo:
            name = todo.pop()
            if name in nodes or name in reads:
                continue
            if name == self.input or (name in available and name not in sinks):
                reads.add(name)
                continue
            nodes.add(name)
            todo.extend(d for d in self.deps[name] if self.kind[d] == "spatial")
        return nodes, reads

    def _loops(self) -> list[Loop]:
        loops: list[Loop] = []
        available: set[str] = set()  # stored values complete before the loop being built
        by_level: dict[int, list[str]] = {}
        for sink in self._sinks():
            by_level.setdefault(self.level[sink], []).append(sink)
        for level in sorted(by_level):
            current: Loop | None = None
            for sink in by_level[level]:
                if current is not None and self._joins(current, sink, available):
                    current.sinks.append(sink)
                else:
                    if current is not None:
                        loops.append(current)
                        available |= {s for s in current.sinks if s in self.stored}
                    current = Loop(self.tag[sink].height, [sink])
            loops.append(current)
            available |= {s for s in current.sinks if s in self.stored}
        available = set()
        for loop in loops:
            nodes, loop.reads = self._subgraph(loop.sinks, available)
            loop.nodes = [n for n in self.order if n in nodes]
            widest = max(prod(self.shape[n]) for n in nodes | loop.reads)
            loop.rows = max(MIN_STRIP_ROWS, min(loop.height, STRIP_BYTES * loop.height // max(1, 4 * widest)))
            available |= {s for s in loop.sinks if s in self.stored}
        return loops

    def _joins(self, loop: Loop, sink: str, available: set[str]) -> bool:
        """Whether ``sink`` can be computed in ``loop``'s strips: same rows, no halo of the loop's own stores."""
        if self.tag[sink].height != loop.height:
            return False
        sinks = loop.sinks + [sink]
        nodes, _ = self._subgraph(sinks, available)
        r0 = loop.height // 2
        r1 = min(loop.height, r0 + MIN_STRIP_ROWS)
        need = self.requirements([n for n in self.order if n in nodes], sinks, r0, r1)
        return all(need.get(s, (r0, r1)) == (r0, r1) for s in loop.sinks if s in self.stored)

    def scratch_bytes(self) -> int:
        """Temporary disk at the widest point: stored values from their loop to the last loop that reads them."""
        last: dict[str, int] = {}
        first: dict[str, int] = {}
        for i, loop in enumerate(self.loops):
            for name in loop.reads:
                last[name] = i
            for name in loop.sinks:
                first.setdefault(name, i)
        widest = 0
        for i in range(len(self.loops)):
            alive = [n for n in self.stored if first[n] <= i <= last.get(n, first[n])]
            widest = max(widest, sum(2 * prod(self.shape[n]) for n in alive))
        return widest


