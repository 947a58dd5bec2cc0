"""Named passes over an imported :class:`~anipaint.networks.ir.Graph`: each takes the graph, edits it in place and
says what it changed in ``graph.meta`` (``rewrites``, ``repairs``, ``fixed_size_ops``; ``passes`` lists the passes
run, in order).

* :func:`dynamic_resizes` and :func:`dynamic_reshapes` turn the shapes a converter baked into ``ResizeBilinear``
  sizes and ``Reshape`` targets for its one input size into shape arithmetic on the live tensors (``Shape`` /
  ``StridedSlice`` / ``Mul`` / ``Pack``, the pattern TensorFlow's own graphs use), so the graph runs at any size.
  They need the shapes the file stored for each value (``shapes``).
* :func:`restore_flushed_epsilons` puts back norm and attention epsilons that a float16 export flushed to zero.
* :func:`live_input_sized_ones` rebuilds a folded ``ones`` map of the exported input size from the live input.
* :func:`append_clip` clips the output (as ordinary ops, so every backend and the full-resolution path run it).
* :func:`drop_unread_consts` removes constants no node reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from anipaint.networks.ir import Graph, Node


class Editor:
    """Adds nodes to a graph in topological order: each new node goes right before the node being rewritten."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.used = {n.name for n in graph.nodes} | set(graph.consts)
        self.inserts: dict[str | None, list[Node]] = {}
        self.at: str | None = None  # None: append at the end
        self._shape_cache: dict[tuple[str, int], str] = {}

    @contextmanager
    def before(self, node: Node | None) -> Iterator[None]:
        self.at = node.name if node is not None else None
        try:
            yield
        finally:
            self.at = None

    def unique(self, name: str) -> str:
        base, k = name, 1
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name

    def const(self, name: str, arr: np.ndarray) -> str:
        name = self.unique(name)
        self.graph.consts[name] = arr
        return name

    def emit(self, name: str, op: str, inputs: list[str], attrs: dict[str, Any] | None = None) -> str:
        node = Node(self.unique(name), op, inputs, attrs or {})
        self.inserts.setdefault(self.at, []).append(node)
        return node.name

    def shape_of(self, ref: str) -> str:
        if (ref, -1) not in self._shape_cache:
            self._shape_cache[(ref, -1)] = self.emit(f"{ref}/Shape", "Shape", [ref], {"out_type": "int32"})
        return self._shape_cache[(ref, -1)]

    def dim(self, ref: str, axis: int) -> str:
        """Scalar int32 ``Shape(ref)[axis]`` (Shape + StridedSlice with shrink_axis_mask, as TF emits it)."""
        key = (ref, axis)
        if key not in self._shape_cache:
            shape = self.shape_of(ref)
            begin = self.const(f"{ref}/dim{axis}/begin", np.array([axis], np.int32))
            end = self.const(f"{ref}/dim{axis}/end", np.array([axis + 1], np.int32))
            strides = self.const(f"{ref}/dim{axis}/strides", np.array([1], np.int32))
            self._shape_cache[key] = self.emit(f"{ref}/dim{axis}", "StridedSlice", [shape, begin, end, strides],
                                               {"shrink_axis_mask": 1})
        return self._shape_cache[key]

    def pack(self, name: str, parts: list[str | int]) -> str:
        inputs = [p if isinstance(p, str) else self.const(f"{name}/{k}", np.array(p, np.int32))
                  for k, p in enumerate(parts)]
        return self.emit(name, "Pack", inputs, {"axis": 0, "N": len(inputs)})

    def finish(self) -> None:
        nodes: list[Node] = []
        for node in self.graph.nodes:
            nodes += self.inserts.pop(node.name, [])
            nodes.append(node)
        nodes += self.inserts.pop(None, [])
        self.graph.nodes[:] = nodes


def _done(graph: Graph, name: str) -> None:
    graph.meta.setdefault("passes", []).append(name)


def dynamic_resizes(graph: Graph, shapes: dict[str, list[int]]) -> None:
    """A constant ``ResizeBilinear`` size that is an integer multiple of the stored input becomes
    ``k * Shape(x)[1:3]``; any other ratio stays constant and is listed in ``fixed_size_ops``."""
    ed = Editor(graph)
    for node in list(graph.nodes):
        if node.op != "ResizeBilinear" or node.inputs[1] not in graph.consts:
            continue
        stored, src = graph.consts[node.inputs[1]], shapes.get(node.inputs[0], [])
        if len(src) != 4:
            continue
        ratios = {int(stored[0]) / src[1], int(stored[1]) / src[2]}
        if len(ratios) != 1 or not float(next(iter(ratios))).is_integer():
            graph.meta.setdefault("fixed_size_ops", []).append(node.name)
            continue
        k = int(next(iter(ratios)))
        with ed.before(node):
            parts: list[str | int] = []
            for axis in (1, 2):
                factor = ed.const(f"{node.name}/size/mul{axis}/x", np.array(k, np.int32))
                parts.append(ed.emit(f"{node.name}/size/mul{axis}", "Mul", [factor, ed.dim(node.inputs[0], axis)]))
            node.inputs[1] = ed.pack(f"{node.name}/size", parts)
        graph.meta.setdefault("rewrites", []).append({"op": "ResizeBilinear", "name": node.name,
                                                      "stored": [int(v) for v in stored],
                                                      "to": f"{k} * Shape(input)[1:3]"})
    ed.finish()
    _done(graph, "dynamic_resizes")


def dynamic_reshapes(graph: Graph, shapes: dict[str, list[int]]) -> None:
    """A constant ``Reshape`` target becomes the live shape of an upstream tensor that had exactly that shape
    (an "unflatten" back to NHWC), or ``[N, ..., -1, ..., C]`` when one flattened dim is all that varies."""
    producer = {n.name: n for n in graph.nodes}
    ed = Editor(graph)
    for node in list(graph.nodes):
        if node.op != "Reshape" or node.inputs[1] not in graph.consts:
            continue
        x, target = node.inputs[0], [int(d) for d in graph.consts[node.inputs[1]].reshape(-1)]
        with ed.before(node):
            dynamic = _dynamic_shape(graph, ed, producer, shapes, x, target, node.name)
        if dynamic is None:
            graph.meta.setdefault("fixed_size_ops", []).append(node.name)
        else:
            node.inputs[1] = dynamic
    ed.finish()
    _done(graph, "dynamic_reshapes")


def _dynamic_shape(graph: Graph, ed: Editor, producer: dict[str, Node], shapes: dict[str, list[int]], x: str,
                   target: list[int], name: str) -> str | None:
    ancestor, seen = x, 0
    while ancestor in producer and producer[ancestor].inputs and seen < 24:  # upstream along data inputs
        ancestor, seen = producer[ancestor].inputs[0], seen + 1
        if ancestor not in graph.consts and shapes.get(ancestor) == target:
            graph.meta.setdefault("rewrites", []).append({"op": "Reshape", "name": name, "stored": target,
                                                          "to": f"Shape({ancestor})"})
            return ed.shape_of(ancestor)
    src = shapes.get(x, [])
    parts: list[str | int] = []
    for k, d in enumerate(target):
        if k == 0 and src and d == src[0]:
            parts.append(ed.dim(x, 0))
        elif d == 1 or (k == len(target) - 1 and src and d == src[-1]):
            parts.append(d)
        else:
            parts.append(-1)
    if parts.count(-1) > 1:
        return None
    graph.meta.setdefault("rewrites", []).append({"op": "Reshape", "name": name, "stored": target,
                                                  "to": ["N" if isinstance(p, str) else p for p in parts]})
    return ed.pack(f"{name}/shape", parts)


def restore_flushed_epsilons(graph: Graph, fp16_consts: set[str]) -> None:
    """Put back the epsilons a float16 export flushed to zero.

    AnimeGANv3's norms compute ``(x - mean) / sqrt(var + 1e-5)`` and its attention ``a / (1e-9 + sum(a))`` (the
    float32 Shinkai v3 graph from the same release holds exactly these constants). In the fp16 file both are 0,
    so a flat input (a black video frame) gives ``rsqrt(0)`` = inf and a NaN picture, in LiteRT too. Only zero
    float16 scalars added right before a Sqrt/Rsqrt or a divisor are touched.
    """
    users: dict[str, list[Node]] = {}
    for n in graph.nodes:
        for i in n.inputs:
            users.setdefault(i, []).append(n)
    ed = Editor(graph)
    for n in graph.nodes:
        if n.op not in ("Add", "AddV2"):
            continue
        zeros = [i for i in n.inputs if i in fp16_consts and graph.consts[i].shape == () and graph.consts[i] == 0]
        if len(zeros) != 1:
            continue
        after = users.get(n.name, [])
        if after and all(u.op in ("Sqrt", "Rsqrt") for u in after):
            eps = 1e-5
        elif after and all(u.op == "RealDiv" and u.inputs[1] == n.name for u in after):
            eps = 1e-9
        else:
            continue
        n.inputs[n.inputs.index(zeros[0])] = ed.const(f"{n.name}/epsilon", np.array(eps, np.float32))
        graph.meta.setdefault("repairs", []).append({"node": n.name, "was": 0.0, "now": eps,
                                                     "why": "epsilon flushed to zero by the float16 export"})
    _done(graph, "restore_flushed_epsilons")


def live_input_sized_ones(graph: Graph) -> None:
    """A constant map of ones the size of the exported input (a converter's folded ``tf.ones_like(x[..., :1])``,
    e.g. the pixel count of White-box's guided-filter box means) is rebuilt from the live input, so the graph runs
    at other sizes: ``Mean(x, channels) * 0 + 1``."""
    ref = graph.meta.get("input_shape") or []
    x = graph.inputs[0]
    ones = [k for k, v in graph.consts.items() if v.ndim == 4 and list(v.shape[:3]) == list(ref[:3])
            and v.shape[3] == 1 and v.dtype.kind == "f" and bool(np.all(v == 1.0))]
    if not ones or len(ref) != 4:
        _done(graph, "live_input_sized_ones")
        return
    ed = Editor(graph)
    first = next(n for n in graph.nodes if n.op != "Placeholder")
    with ed.before(first):
        axis = ed.const("input_ones/axis", np.array([3], np.int32))
        mean = ed.emit("input_ones/mean", "Mean", [x, axis], {"keep_dims": True})
        zero = ed.emit("input_ones/zero", "Mul", [mean, ed.const("input_ones/0", np.array(0.0, np.float32))])
        live = ed.emit("input_ones", "AddV2", [zero, ed.const("input_ones/1", np.array(1.0, np.float32))])
    for node in graph.nodes:
        node.inputs = [live if i in ones else i for i in node.inputs]
    ed.finish()
    graph.meta.setdefault("rewrites", []).extend({"op": "Const", "name": k, "stored": list(graph.consts[k].shape),
                                                  "to": "ones like Shape(input)[0:3]"} for k in ones)
    _done(graph, "live_input_sized_ones")


def append_clip(graph: Graph, low: float = -1.0, high: float = 1.0) -> None:
    """Clip the first output to [low, high] (White-box's generator + guided filter overshoot to about ±1.3)."""
    ed = Editor(graph)
    y = graph.outputs[0]
    floor = ed.emit(f"{y}/clip_low", "Maximum", [y, ed.const(f"{y}/low", np.array(low, np.float32))])
    graph.outputs[0] = ed.emit(f"{y}/clip", "Minimum", [floor, ed.const(f"{y}/high", np.array(high, np.float32))])
    ed.finish()
    graph.meta["postprocess"] = f"clipped to [{low:g}, {high:g}]"
    _done(graph, "append_clip")


def drop_unread_consts(graph: Graph) -> None:
    read = {i for n in graph.nodes for i in n.inputs} | set(graph.outputs)
    for name in [k for k in graph.consts if k not in read]:
        del graph.consts[name]
    _done(graph, "drop_unread_consts")
