"""TF2 SavedModel folders (``saved_model.pb`` + ``variables/``) -> the graph IR, without TensorFlow.

``saved_model.pb`` is a ``SavedModel`` message holding a ``MetaGraphDef``. Its graph does not hold the network:
the ``serving_default`` signature's output is a ``StatefulPartitionedCall`` of a function in the graph's function
library, which calls further functions; the weights enter as resource handles (``VarHandleOp``) read inside with
``ReadVariableOp``. The reader inlines every call into one flat GraphDef (function-local names prefixed by the
call's name; ``node:output_arg:index`` references resolved), turns each ``ReadVariableOp`` into a Const holding
the variable's value, and hands the result to the GraphDef translation (:func:`.graphdef.translate`).

Variable values come from the ``variables/`` tensor bundle: ``variables.index`` is a sorted string table (the
LevelDB SSTable format: prefix-compressed keys in blocks, an index block, a 48-byte footer) mapping checkpoint
keys to ``BundleEntryProto`` records (dtype, shape, shard, offset, size) that point into the data shards. A
variable's checkpoint key is its path in the saved object graph (``down_conv1/bn_act/layer-0/beta``) plus
``/.ATTRIBUTES/VARIABLE_VALUE``. Multi-output ``Split`` nodes become one ``Split`` node per output
(``output_index``), since IR nodes have one output.

The protobuf messages (SavedModel, MetaGraphDef, BundleEntryProto, ...) are those of
:mod:`anipaint.importers.tf_schema`: TensorFlow's wire format, only the fields read here.
"""

from __future__ import annotations

import struct
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from anipaint.errors import ModelImportError
from anipaint.importers import tf_schema as tfs
from anipaint.importers.graphdef import tensor_to_numpy, translate
from anipaint.networks.ir import Graph

_FOOTER = 48
_MAGIC = 0xDB4775248B80FB57
_DTYPES = {tfs.DT_FLOAT: np.float32, tfs.DT_DOUBLE: np.float64, tfs.DT_HALF: np.float16,
           tfs.DT_INT32: np.int32, tfs.DT_INT64: np.int64}
_SKIPPED = {"NoOp", "AssignVariableOp", "VarHandleOp"}


class SavedModelImportError(ModelImportError):
    """The folder is not a TF2 SavedModel this reader can translate."""


# --- the tensor bundle --------------------------------------------------------------------------------------------
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, pos


def _block(table: bytes, handle: bytes) -> list[tuple[bytes, bytes]]:
    """The (key, value) entries of one SSTable block (uncompressed), keys un-prefix-compressed."""
    offset, pos = _varint(handle, 0)
    size, _ = _varint(handle, pos)
    if table[offset + size] != 0:
        raise SavedModelImportError("compressed tensor-bundle blocks are not supported")
    block = table[offset : offset + size]
    restarts = struct.unpack("<I", block[-4:])[0]
    end, pos, key = len(block) - 4 - 4 * restarts, 0, b""
    entries = []
    while pos < end:
        shared, pos = _varint(block, pos)
        fresh, pos = _varint(block, pos)
        length, pos = _varint(block, pos)
        key = key[:shared] + block[pos : pos + fresh]
        pos += fresh
        entries.append((key, block[pos : pos + length]))
        pos += length
    return entries


def read_bundle(variables: Path) -> dict[str, np.ndarray]:
    """Every numeric tensor in a TF tensor bundle (``variables.index`` + ``variables.data-*``), by key."""
    table = (variables / "variables.index").read_bytes()
    footer = table[-_FOOTER:]
    if struct.unpack("<Q", footer[-8:])[0] != _MAGIC:
        raise SavedModelImportError(f"{variables / 'variables.index'} is not a tensor-bundle index")
    _, pos = _varint(footer, _varint(footer, 0)[1])  # skip the metaindex handle
    entries = [kv for _, handle in _block(table, footer[pos:]) for kv in _block(table, handle)]
    try:
        header = tfs.BundleHeaderProto.FromString(dict(entries).get(b"", b""))
        records = [(key, tfs.BundleEntryProto.FromString(value)) for key, value in entries if key]
    except DecodeError as exc:
        raise SavedModelImportError(f"{variables / 'variables.index'} holds a damaged entry ({exc})") from exc
    shards = header.num_shards or 1
    data = {k: (variables / f"variables.data-{k:05d}-of-{shards:05d}").read_bytes() for k in range(shards)}
    out: dict[str, np.ndarray] = {}
    for key, entry in records:
        if entry.dtype not in _DTYPES:
            continue  # strings: the object graph and configs, not weights
        shape = [d.size for d in entry.shape.dim]
        raw = data[entry.shard_id][entry.offset : entry.offset + entry.size]
        out[key.decode()] = np.frombuffer(raw, np.dtype(_DTYPES[entry.dtype]).newbyteorder("<")).reshape(shape).copy()
    return out


def _checkpoint_keys(meta: tfs.MetaGraphDef, bundle: dict[str, np.ndarray]) -> dict[str, str]:
    """Variable name (its VarHandleOp) -> checkpoint key: the variable's path in the object graph, breadth first;
    of an object's several names the first whose key is in the bundle."""
    nodes = meta.object_graph_def.nodes
    paths: dict[int, list[str]] = {0: [""]}
    queue = deque([0])
    while queue:
        k = queue.popleft()
        for child in nodes[k].children:
            extended = [f"{p}/{child.local_name}".lstrip("/") for p in paths[k]]
            if child.node_id not in paths:
                paths[child.node_id] = extended
                queue.append(child.node_id)
            elif len(paths[child.node_id]) < 8:
                paths[child.node_id] += extended[: 8 - len(paths[child.node_id])]
    keys: dict[str, str] = {}
    for k, node in enumerate(nodes):
        if node.WhichOneof("kind") != "variable":
            continue
        found = [f"{p}/.ATTRIBUTES/VARIABLE_VALUE" for p in paths.get(k, [])]
        found = [key for key in found if key in bundle]
        if found:
            keys[node.variable.name] = found[0]
    return keys


# --- inlining the function library ------------------------------------------------------------------------------
class _Inliner:
    def __init__(self, meta: tfs.MetaGraphDef, values: dict[str, np.ndarray]) -> None:
        self.functions = {f.signature.name: f for f in meta.graph_def.library.function}
        self.values = values  # variable (VarHandleOp) name -> value
        self.flat = tfs.GraphDef()
        self.consts: dict[str, np.ndarray] = {}
        self.pass_through: dict[str, str] = {}  # flat Identity name -> its input (to find the variable read)

    def add(self, node: tfs.NodeDef) -> None:
        self.flat.node.append(node)
        if node.op == "Identity":
            self.pass_through[node.name] = node.input[0]

    def variable(self, ref: str) -> np.ndarray:
        seen = 0
        while ref in self.pass_through and seen < 64:
            ref, seen = self.pass_through[ref], seen + 1
        if ref not in self.values:
            raise SavedModelImportError(f"resource {ref!r} is not a saved variable")
        return self.values[ref]

    def call(self, fname: str, prefix: str, args: list[str]) -> list[str]:
        """Inline function ``fname`` with its inputs bound to ``args``; returns its outputs' flat references."""
        fdef: tfs.FunctionDef = self.functions[fname]
        bound = {a.name: v for a, v in zip(fdef.signature.input_arg, args, strict=True)}
        outputs: dict[str, list[str]] = {}  # function node -> its outputs' flat references
        by_name = {n.name: n for n in fdef.node_def}

        def ref(name: str) -> str:
            if name in bound:
                return bound[name]
            node, _, index = (name.split(":") + ["", "0"])[:3]
            return outputs[node][int(index or 0)]

        for node in _ordered(fdef, by_name):
            flat = f"{prefix}/{node.name}"
            ins = [ref(i) for i in node.input if not i.startswith("^")]
            if node.op in ("StatefulPartitionedCall", "PartitionedCall"):
                outputs[node.name] = self.call(node.attr["f"].func.name, flat, ins)
            elif node.op == "ReadVariableOp":
                self.consts[flat] = self.variable(ins[0])
                self.add(_node(flat, "Const", []))
                outputs[node.name] = [flat]
            elif node.op == "Const":
                self.consts[flat] = tensor_to_numpy(node.attr["value"].tensor)
                self.add(_node(flat, "Const", []))
                outputs[node.name] = [flat]
            elif node.op == "Split":
                n = int(node.attr["num_split"].i)
                outputs[node.name] = []
                for k in range(n):
                    part = _node(f"{flat}/{k}", "Split", ins, node.attr)
                    part.attr["output_index"].i = k
                    self.add(part)
                    outputs[node.name].append(part.name)
            elif node.op in _SKIPPED:
                outputs[node.name] = [flat]
            else:
                self.add(_node(flat, node.op, ins, node.attr))
                outputs[node.name] = [flat]
        return [ref(fdef.ret[a.name]) for a in fdef.signature.output_arg]


def _node(name: str, op: str, inputs: list[str], attrs: Any = None) -> tfs.NodeDef:
    node = tfs.NodeDef(name=name, op=op, input=inputs)
    for k, v in (attrs or {}).items():
        node.attr[k].CopyFrom(v)
    return node


def _ordered(fdef: tfs.FunctionDef, by_name: dict[str, Any]) -> list[Any]:
    """A function's nodes with every producer before its users (FunctionDef keeps no order)."""
    order, state = [], {}
    for root in fdef.node_def:
        stack = [(root, False)]
        while stack:
            node, done = stack.pop()
            if done:
                if state.get(node.name) != 2:
                    state[node.name] = 2
                    order.append(node)
                continue
            if state.get(node.name):
                continue
            state[node.name] = 1
            stack.append((node, True))
            for i in node.input:
                producer = by_name.get(i.lstrip("^").split(":")[0])
                if producer is not None and not state.get(producer.name):
                    stack.append((producer, False))
    return order


# --- entry points ---------------------------------------------------------------------------------------------
def _meta_graph(folder: Path) -> tfs.MetaGraphDef:
    path = folder / "saved_model.pb"
    try:
        return tfs.SavedModel.FromString(path.read_bytes()).meta_graphs[0]
    except Exception as exc:  # noqa: BLE001 - a missing file, an empty message and protobuf's decode errors
        raise SavedModelImportError(f"{path} is not a SavedModel: {exc}") from exc


def read_saved_model(folder: Path | str, signature: str = "serving_default") -> Graph:
    """A TF2 SavedModel folder -> the IR: one NHWC float input, the signature's first output."""
    folder = Path(folder)
    meta = _meta_graph(folder)
    if signature not in meta.signature_def:
        raise SavedModelImportError(f"{folder}: no signature {signature!r} (has {list(meta.signature_def)})")
    sig = meta.signature_def[signature]
    if len(sig.inputs) != 1:
        raise SavedModelImportError(f"{folder}: signature {signature!r} has {len(sig.inputs)} inputs, not one")
    input_name = next(iter(sig.inputs.values())).name.split(":")[0]
    output_node, _, output_index = next(iter(sig.outputs.values())).name.partition(":")
    bundle = read_bundle(folder / "variables")
    keys = _checkpoint_keys(meta, bundle)
    inliner = _Inliner(meta, {name: bundle[key].astype(np.float32) for name, key in keys.items()})
    outer = {n.name: n for n in meta.graph_def.node}
    call = outer[output_node]
    if call.op not in ("StatefulPartitionedCall", "PartitionedCall"):
        raise SavedModelImportError(f"{folder}: the signature's output {output_node!r} is a {call.op}, not a call")
    placeholder = _node(input_name, "Placeholder", [], outer[input_name].attr)
    inliner.add(placeholder)
    args = [i.split(":")[0] for i in call.input if not i.startswith("^")]
    missing = [a for a in args[1:] if a not in inliner.values]
    if missing:
        raise SavedModelImportError(f"{folder}: no saved value for {missing[:3]}")
    results = inliner.call(call.attr["f"].func.name, call.name, args)
    meta_out = {"source_format": "saved_model", "source": folder.name, "variables": len(keys), "layout": "NHWC"}
    return translate(inliner.flat, inliner.consts, [results[int(output_index or 0)]], meta_out)


def convert(sources: list[Path], out_dir: Path) -> dict[str, Any]:
    """A SavedModel (the registry lists its ``saved_model.pb`` first) -> ``out_dir/model.pt`` (a graph)."""
    from anipaint.networks.graph_module import GraphModule, save_graph

    graph = read_saved_model(Path(sources[0]).parent)
    module = GraphModule(graph)  # fails here, not at first use, if the executor lacks an op
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_graph(graph, out_dir / "model.pt")
    return {"parameters": graph.parameter_count(), "nodes": len(graph.nodes), "format": "saved_model",
            "variables": graph.meta["variables"], "size_multiple": module.size_multiple}
