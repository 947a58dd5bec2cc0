"""The graph form every importer produces, whatever the source format.

A :class:`Graph` is a topologically ordered list of :class:`Node` s in TensorFlow's op vocabulary (NHWC,
TF attribute names), plus the constant tensors as float32/int32 NumPy arrays. The TF.js and ``.pb``
importers produce it directly (it *is* a GraphDef); the TFLite importer translates TFLite builtin ops into the
same vocabulary (weights re-laid to TF's layouts, fused activations split into their own nodes), so one torch
executor (:mod:`anipaint.networks.graph_module`) runs every imported graph, and the converters for the named
networks read weights out of the same structure.

Canonical ops (attributes as in TensorFlow):
  Placeholder, Const, Identity, StopGradient,
  Conv2D(strides, padding VALID|SAME, dilations; filter HWIO), DepthwiseConv2dNative(filter HWC1 -> [H,W,C,M]),
  BiasAdd, MirrorPad(mode REFLECT|SYMMETRIC), Pad,
  Add, AddV2, Sub, Mul, RealDiv, FloorDiv, SquaredDifference, Maximum, Minimum,
  Mean(keep_dims), Sum(keep_dims), Sqrt, Rsqrt, Tanh, LeakyRelu(alpha), Relu, Softmax,
  ResizeBilinear(align_corners, half_pixel_centers),
  Reshape, Transpose, Shape, StridedSlice(masks), Pack(axis), Range, ExpandDims, Squeeze(squeeze_dims),
  ConcatV2, Cast(DstT).

Attributes are plain Python values (str, int, float, bool, lists of them; dtypes as names such as
``"DT_FLOAT"``), so a saved graph loads with ``torch.load(weights_only=True)``. Node inputs are producer names
without ``:0`` suffixes or control inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch


@dataclass
class Node:
    name: str
    op: str
    inputs: list[str] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Graph:
    nodes: list[Node]  # topological order; Const nodes are not listed, their values are in ``consts``
    consts: dict[str, np.ndarray]
    inputs: list[str]
    outputs: list[str]
    meta: dict[str, Any] = field(default_factory=dict)  # source format, original names, notes

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def parameter_count(self) -> int:
        return int(sum(v.size for v in self.consts.values() if v.dtype.kind == "f"))

    def to_dict(self) -> dict[str, Any]:
        """Plain containers only, so ``torch.save`` / ``torch.load(weights_only=True)`` can store it."""
        return {
            "nodes": [
                {"name": n.name, "op": n.op, "inputs": list(n.inputs), "attrs": dict(n.attrs)} for n in self.nodes
            ],
            # torch tensors, not ndarrays: torch.load(weights_only=True) refuses NumPy objects
            # (np.array, not ascontiguousarray, which turns 0-d scalars into 1-d arrays)
            "consts": {k: torch.from_numpy(np.array(v, order="C", copy=True)) for k, v in self.consts.items()},
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "meta": dict(self.meta),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Graph:
        return cls(
            nodes=[Node(d["name"], d["op"], list(d["inputs"]), dict(d["attrs"])) for d in data["nodes"]],
            consts={k: _to_numpy(v) for k, v in data["consts"].items()},
            inputs=list(data["inputs"]),
            outputs=list(data["outputs"]),
            meta=dict(data.get("meta", {})),
        )


def _to_numpy(value: Any) -> np.ndarray:
    """Consts stored either way: torch tensors (current ``to_dict``) or NumPy arrays (older artefacts)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)
