"""ONNX models (tf2onnx exports) -> the graph IR, run by :class:`~anipaint.networks.graph_module.GraphModule`.

tf2onnx writes TensorFlow's NHWC graphs in ONNX's NCHW vocabulary: a Transpose before the first Conv, NCHW
convolutions and norms, Transposes back where the TF graph needed NHWC. The IR speaks TensorFlow (NHWC), so the
reader records for every ONNX tensor which IR value holds it and in which axis order (``onnx = ir.permute(perm)``):
a Transpose only changes the recorded order, a Conv takes its input as the NCHW view of an NHWC value and gives
the same, element-wise constants are re-laid into the IR order, reductions and pads map their axes. An IR
Transpose is emitted only where an op needs the ONNX order itself (Reshape, Squeeze, Slice, a Softmax over a
moved axis, ...); in the AnimeGANv3 exports that is on small tensors only (norm statistics, attention maps).

The walk is here, the per-op translation in :mod:`.onnx_ops`, the value bookkeeping in :mod:`.onnx_reader`.
Float16 models are widened: float16 constants become float32 and Casts between float types disappear, so the
network runs in float32 whatever the file stores. int64 constants become int32 (Slice's "to the end" sentinel
is clipped). The nodes are sorted topologically first (float16 converters append their Casts at the end).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx
from onnx import helper

from anipaint.importers.onnx_ops import OPS
from anipaint.importers.onnx_reader import OnnxImportError, Reader
from anipaint.networks.ir import Graph, Node

__all__ = ["OnnxImportError", "convert_graph", "read_onnx"]


def _translate(r: Reader) -> Graph:
    graph = r.graph
    initializers = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializers]
    if len(inputs) != 1:
        raise OnnxImportError(f"{r.source}: expected one input, found {[i.name for i in inputs]}")
    inp = inputs[0]
    dims = [d.dim_value or -1 for d in inp.type.tensor_type.shape.dim]
    if len(dims) != 4 or dims[-1] != 3:
        raise OnnxImportError(f"{r.source}: expected an NHWC RGB input, got {inp.name} {dims}")
    name = r.emit(inp.name, "Placeholder", [], {"dtype": "float32", "shape": [-1, -1, -1, 3]})
    r.set(inp.name, name)
    for node in graph.node:  # sorted by read_onnx
        handler = OPS.get(node.op_type)
        if handler is None or node.domain not in ("", "ai.onnx"):
            raise OnnxImportError(f"{r.source}: ONNX op {node.op_type} ({node.name!r}) is not supported")
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        handler(r, node, {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()})
    outputs = [r.plain(o.name) for o in graph.output]
    return _prune(Graph(r.nodes, r.consts, [name], outputs, {}))


def _topological(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Nodes in an order where every input is produced first (Kahn's algorithm, file order as tie-break)."""
    produced_by = {o: k for k, n in enumerate(graph.node) for o in n.output}
    waiting = {k: {i for i in n.input if i and i in produced_by} for k, n in enumerate(graph.node)}
    users: dict[int, list[int]] = {}
    for k, deps in waiting.items():
        for d in deps:
            users.setdefault(produced_by[d], []).append(k)
    pending = {k: len({produced_by[d] for d in deps}) for k, deps in waiting.items()}
    queue = [k for k, c in pending.items() if c == 0]
    order: list[int] = []
    while queue:
        queue.sort(reverse=True)
        k = queue.pop()
        order.append(k)
        for u in set(users.get(k, [])):
            pending[u] -= 1
            if pending[u] == 0:
                queue.append(u)
    if len(order) != len(graph.node):
        raise OnnxImportError("ONNX graph has a cycle or an input no node produces")
    return [onnx.NodeProto.FromString(graph.node[k].SerializeToString()) for k in order]


def _prune(graph: Graph) -> Graph:
    """Drop nodes the outputs do not depend on and constants nobody reads."""
    needed = set(graph.outputs)
    keep: list[Node] = []
    for node in reversed(graph.nodes):
        if node.name in needed or node.op == "Placeholder":
            keep.append(node)
            needed.update(node.inputs)
    keep.reverse()
    consts = {k: v for k, v in graph.consts.items() if k in needed}
    return Graph(keep, consts, graph.inputs, graph.outputs, graph.meta)


# --- entry points ---------------------------------------------------------------------------------------------
def read_onnx(path: Path | str) -> Graph:
    """Read an ONNX model (a tf2onnx export with one NHWC RGB input) into the IR, float32 throughout."""
    path = Path(path)
    try:
        model = onnx.load(str(path))
    except Exception as exc:  # noqa: BLE001 - protobuf raises several types for a file that is not ONNX
        raise OnnxImportError(f"{path} is not an ONNX model: {exc}") from exc
    ordered = _topological(model.graph)
    del model.graph.node[:]
    model.graph.node.extend(ordered)
    onnx.checker.check_model(model)
    graph = _translate(Reader(model, path.name))
    graph.meta.update({
        "source_format": "onnx",
        "source": path.name,
        "producer": f"{model.producer_name} {model.producer_version}".strip(),
        "opset": next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None),
        "layout": "NHWC",
        "notes": "ONNX (NCHW ops over a TF NHWC graph) translated to the NHWC IR; float16 widened to float32.",
    })
    return graph


def convert_graph(sources: list[Path], out_dir: Path) -> dict[str, Any]:
    """An ONNX network run by the graph executor -> ``out_dir/model.pt`` holding ``Graph.to_dict()``."""
    from anipaint.networks.graph_module import GraphModule, save_graph

    graph = read_onnx(sources[0])
    module = GraphModule(graph)  # fails here, not at first use, if the executor lacks an op
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_graph(graph, out_dir / "model.pt")
    return {"parameters": graph.parameter_count(), "nodes": len(graph.nodes), "format": "onnx",
            "opset": graph.meta["opset"], "size_multiple": module.size_multiple, "notes": graph.meta["notes"]}
