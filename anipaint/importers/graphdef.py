"""TensorFlow GraphDef importer: TF.js graph models (``model.json`` + shards) and frozen ``.pb`` files.

A TF.js ``modelTopology`` is a GraphDef written as protobuf JSON, so both forms are parsed into the same
protobuf message (``GraphDef`` of :mod:`anipaint.importers.tf_schema`, our own schema of TensorFlow's format; no
TensorFlow at run time) and translated by one function into the :class:`~anipaint.networks.ir.Graph` IR. Only the
constant values differ: a ``.pb`` carries them in its Const nodes, a TF.js model in the weight shards listed by
``weightsManifest``.

Translation: Identity and StopGradient are folded away (they only forward a tensor), control inputs and
``:0`` suffixes are dropped, nodes the outputs do not depend on are pruned, the rest is sorted topologically.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from google.protobuf import json_format
from google.protobuf.message import DecodeError

from anipaint.errors import ModelImportError
from anipaint.importers import tf_schema as tfs
from anipaint.networks.ir import Graph, Node

PASS_THROUGH = {"Identity", "StopGradient", "Snapshot"}
_DROPPED_ATTRS = {"T", "_output_shapes", "_class", "value", "use_cudnn_on_gpu", "Tidx", "Tshape", "Tperm",
                  "Tpaddings", "Tdim", "Index", "out_type", "N"}

# TF dtype enum -> NumPy dtype for Const tensors; floats end up float32, integers int32 (see _normalise)
_NP_DTYPES = {
    tfs.DT_FLOAT: np.float32,
    tfs.DT_DOUBLE: np.float64,
    tfs.DT_HALF: np.float16,
    tfs.DT_INT32: np.int32,
    tfs.DT_INT64: np.int64,
    tfs.DT_UINT8: np.uint8,
    tfs.DT_INT8: np.int8,
    tfs.DT_BOOL: np.bool_,
}
# the TensorProto repeated field holding values when tensor_content is empty
_VAL_FIELDS = {
    tfs.DT_FLOAT: "float_val",
    tfs.DT_DOUBLE: "double_val",
    tfs.DT_HALF: "half_val",
    tfs.DT_INT32: "int_val",
    tfs.DT_UINT8: "int_val",
    tfs.DT_INT8: "int_val",
    tfs.DT_INT64: "int64_val",
    tfs.DT_BOOL: "bool_val",
}


# ---------------------------------------------------------------------------------------------- readers


class GraphDefImportError(ModelImportError):
    """The file is not a frozen GraphDef or TF.js graph model this reader can translate."""


def read_pb(path: Path) -> Graph:
    """A frozen GraphDef (``.pb``): constants come from the Const nodes' ``value`` tensors."""
    gdef = tfs.GraphDef()
    try:
        gdef.ParseFromString(Path(path).read_bytes())
    except DecodeError as exc:
        raise GraphDefImportError(f"{path} is not a TensorFlow GraphDef ({exc})") from exc
    consts = {n.name: tensor_to_numpy(n.attr["value"].tensor) for n in gdef.node if n.op == "Const"}
    return translate(gdef, consts, outputs=None, meta={"source_format": "graphdef_pb", "file": Path(path).name})


def read_tfjs(model_json: Path, shards: list[Path] | None = None) -> Graph:
    """A TF.js graph model: topology from ``model.json``, constants dequantized from the weight shards.

    Shards are the manifest's paths next to ``model.json``, unless ``shards`` names the files (matched to the
    manifest by file name, e.g. verified copies kept elsewhere).
    """
    model_json = Path(model_json)
    try:
        model = json.loads(model_json.read_text())
        if not isinstance(model, dict) or model.get("format") not in (None, "graph-model"):
            raise ValueError(f"format {model.get('format') if isinstance(model, dict) else None!r}")
        gdef = json_format.ParseDict(model["modelTopology"], tfs.GraphDef(), ignore_unknown_fields=True)
    except (ValueError, KeyError, json_format.ParseError) as exc:  # JSONDecodeError is a ValueError
        raise GraphDefImportError(f"{model_json} is not a TF.js graph model ({exc})") from exc
    consts = read_tfjs_weights(model_json.parent, model["weightsManifest"], shards)
    missing = [n.name for n in gdef.node if n.op == "Const" and n.name not in consts]
    for name in missing:  # small constants may also be inlined in the topology
        node = next(n for n in gdef.node if n.name == name)
        consts[name] = tensor_to_numpy(node.attr["value"].tensor)
    outputs = None
    signature = model.get("signature") or model.get("userDefinedMetadata", {}).get("signature")
    if signature and signature.get("outputs"):
        outputs = [_tensor_name(o["name"]) for o in signature["outputs"].values()]
    meta = {"source_format": "tfjs_graph_model", "file": model_json.name,
            "converted_by": str(model.get("convertedBy", "")), "generated_by": str(model.get("generatedBy", ""))}
    return translate(gdef, consts, outputs=outputs, meta=meta)


def read_tfjs_weights(folder: Path, manifest: list[dict[str, Any]], shards: list[Path] | None = None
                      ) -> dict[str, np.ndarray]:
    """Constants of a TF.js weights manifest, in file order, dequantized as tfjs-core does.

    Each group's shard files are concatenated; entries are read in order. Quantized entries store
    ``uint8``/``uint16`` codes with ``value = min + q * scale`` (tfjs evaluates this in double precision and
    stores float32, reproduced here), or ``float16`` values; ``int32`` results are rounded like tfjs.
    """
    out: dict[str, np.ndarray] = {}
    by_name = {Path(p).name: Path(p) for p in shards or []}
    for group in manifest:
        buf = b"".join(by_name.get(Path(p).name, Path(folder) / p).read_bytes() for p in group["paths"])
        offset = 0
        for w in group["weights"]:
            shape = [int(d) for d in w["shape"]]
            count = int(np.prod(shape, dtype=np.int64))
            dtype = w["dtype"]
            quant = w.get("quantization")
            if quant:
                qtype = np.dtype(quant["dtype"])
                raw = np.frombuffer(buf, qtype, count, offset)
                offset += count * qtype.itemsize
                if qtype == np.float16:
                    value = raw.astype(np.float64)
                else:
                    value = raw.astype(np.float64) * float(quant["scale"]) + float(quant["min"])
                value = np.round(value).astype(np.int32) if dtype == "int32" else value.astype(np.float32)
            else:
                np_type = {"float32": np.float32, "int32": np.int32, "bool": np.bool_}[dtype]
                value = np.frombuffer(buf, np_type, count, offset).copy()
                offset += count * np.dtype(np_type).itemsize
            out[w["name"]] = value.reshape(shape)
        if offset != len(buf):
            raise ValueError(f"weights manifest covers {offset} bytes of {len(buf)} in {group['paths']}")
    return out


# ---------------------------------------------------------------------------------------------- converters


def convert_tfjs_v1(sources: list[Path], out_dir: Path) -> dict[str, Any]:
    """AnimeGAN v1 (TF.js): constants mapped by TF name onto the named network; saves its state dict."""
    from anipaint.networks.animeganv1 import AnimeGANv1Generator

    model_json = next((Path(p) for p in sources if str(p).endswith(".json")), None)
    if model_json is None:
        raise GraphDefImportError(f"no model.json among {', '.join(Path(p).name for p in sources)}")
    graph = read_tfjs(model_json, [Path(p) for p in sources if not str(p).endswith(".json")])
    net = AnimeGANv1Generator.from_graph(graph)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.save(net.state_dict(), out_dir / "model.pt")
    return {"parameters": sum(p.numel() for p in net.parameters()), "format": "tfjs_graph_model"}


def convert_pb(sources: list[Path], out_dir: Path) -> dict[str, Any]:
    """A frozen GraphDef run by :class:`~anipaint.networks.graph_module.GraphModule`; saves the Graph."""
    from anipaint.networks.graph_module import GraphModule, save_graph

    graph = read_pb(Path(sources[0]))
    GraphModule(graph)  # fails here, not at first use, if the executor lacks an op
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_graph(graph, out_dir / "model.pt")
    return {"parameters": graph.parameter_count(), "nodes": len(graph.nodes), "format": "graphdef_pb"}


# ---------------------------------------------------------------------------------------------- helpers


def tensor_to_numpy(t: tfs.TensorProto) -> np.ndarray:
    """A TensorProto's value: raw ``tensor_content`` or the typed ``*_val`` field (last value repeated)."""
    if t.dtype not in _NP_DTYPES:
        raise ValueError(f"unsupported constant dtype {tfs.DataType.Name(t.dtype)}")
    dtype = np.dtype(_NP_DTYPES[t.dtype]).newbyteorder("<")
    shape = [d.size for d in t.tensor_shape.dim]
    count = int(np.prod(shape, dtype=np.int64))
    if t.tensor_content:
        value = np.frombuffer(t.tensor_content, dtype).copy()
    else:
        vals = list(getattr(t, _VAL_FIELDS[t.dtype]))
        if t.dtype == tfs.DT_HALF:  # half_val holds the float16 bit patterns as ints
            vals_arr = np.asarray(vals, np.uint16).view(np.float16)
        else:
            vals_arr = np.asarray(vals, dtype)
        if vals_arr.size == 0:
            value = np.zeros(count, dtype)
        elif vals_arr.size < count:  # TF stores a splat as one value (or a prefix plus repeats of the last)
            value = np.concatenate([vals_arr, np.full(count - vals_arr.size, vals_arr[-1], vals_arr.dtype)])
        else:
            value = vals_arr
    return _normalise(value.reshape(shape))


def _normalise(value: np.ndarray) -> np.ndarray:
    """The IR's dtypes: float32 for floats, int32 for integers (shape constants), bool kept."""
    if value.dtype.kind == "f":
        return value.astype(np.float32)
    if value.dtype.kind in "iu":
        return value.astype(np.int32)
    return value


def _tensor_name(name: str) -> str:
    """``node:0`` -> ``node``; control inputs (``^node``) keep their marker for the caller to drop."""
    return name.split(":", 1)[0]


def attr_to_python(value: Any) -> Any:
    """An AttrValue as a plain value (bytes decoded, dtypes as names, shapes as lists of ints)."""
    kind = value.WhichOneof("value")
    if kind == "s":
        return value.s.decode("utf-8", "replace")
    if kind in ("i", "f", "b"):
        return getattr(value, kind)
    if kind == "type":
        return tfs.DataType.Name(value.type)
    if kind == "shape":
        return None if value.shape.unknown_rank else [int(d.size) for d in value.shape.dim]
    if kind == "list":
        lst = value.list
        for field in ("i", "f", "b", "s", "type", "shape"):
            items = getattr(lst, field)
            if len(items):
                if field == "s":
                    return [x.decode("utf-8", "replace") for x in items]
                if field == "type":
                    return [tfs.DataType.Name(x) for x in items]
                if field == "shape":
                    return [[int(d.size) for d in x.dim] for x in items]
                return list(items)
        return []
    return None  # tensors and functions: not attributes the executor needs


def translate(gdef: tfs.GraphDef, consts: dict[str, np.ndarray], outputs: list[str] | None,
               meta: dict[str, Any]) -> Graph:
    by_name = {n.name: n for n in gdef.node}

    def resolve(name: str) -> str:
        name = _tensor_name(name)
        seen = set()
        while name in by_name and by_name[name].op in PASS_THROUGH:
            if name in seen:
                raise ValueError(f"cycle of pass-through nodes at {name}")
            seen.add(name)
            name = _tensor_name(by_name[name].input[0])
        return name

    data_inputs = {n.name: [resolve(i) for i in n.input if not i.startswith("^")] for n in gdef.node}
    placeholders = [n.name for n in gdef.node if n.op == "Placeholder"]
    if outputs is None:  # the nodes nobody consumes (excluding dangling constants and pass-throughs)
        consumed = {i for ins in data_inputs.values() for i in ins}
        outputs = [n.name for n in gdef.node
                   if n.name not in consumed and n.op not in PASS_THROUGH | {"Const", "Placeholder", "NoOp"}]
    outputs = [resolve(o) for o in outputs]
    if not outputs:
        raise ValueError("graph has no outputs")

    # keep what the outputs depend on, in topological order (DFS post-order, iterative: graphs are deep)
    order: list[str] = []
    state: dict[str, int] = {}
    for root in outputs:
        stack: list[tuple[str, Iterable[str]]] = [(root, iter(data_inputs[root]))]
        state[root] = 1
        while stack:
            name, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                state[name] = 2
                order.append(name)
            elif nxt not in by_name:
                raise ValueError(f"{name}: input {nxt!r} is not a node of the graph")
            elif state.get(nxt) == 1:
                raise ValueError(f"graph has a cycle through {nxt}")
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(data_inputs[nxt])))

    nodes: list[Node] = []
    used_consts: dict[str, np.ndarray] = {}
    for name in order:
        n = by_name[name]
        if n.op == "Const":
            if name not in consts:
                raise ValueError(f"no value for constant {name}")
            used_consts[name] = consts[name]
            continue
        # in name order: protobuf leaves a map's order undefined, the artefact must be the same in every process
        attrs = {k: attr_to_python(v) for k, v in sorted(n.attr.items()) if k not in _DROPPED_ATTRS}
        nodes.append(Node(name, n.op, data_inputs[name], {k: v for k, v in attrs.items() if v is not None}))
    inputs = [p for p in placeholders if p in state]
    meta = dict(meta)
    meta["producer"] = int(gdef.versions.producer)
    return Graph(nodes=nodes, consts=used_consts, inputs=inputs, outputs=outputs, meta=meta)
