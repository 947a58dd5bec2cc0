"""Our own TensorFlow protobuf schema (anipaint/importers/tf_schema.py) against TensorFlow's generated classes.

TensorFlow (test-only) runs once, in a subprocess of its own (it never shares a process with torch): it writes a tiny
graph of its own making (binary and JSON), describes it and the original Shinkai ``.pb`` field by field, parses what
our schema re-serialised from the original files, and checks our declarations against its own descriptors. The
tests then parse the same bytes with our schema and compare.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from google.protobuf import json_format

from anipaint.importers import tf_schema

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT.parent / "shared" / "models"
SHINKAI_PB = MODELS / "animeganv3" / "AnimeGANv3_Shinkai_37.pb"
SAVED_MODEL = MODELS / "cartoongan" / "light_shinkai_SavedModel" / "saved_model.pb"


def describe(gdef: Any) -> dict[str, Any]:
    """Every GraphDef field our schema declares, read the same way from TF's message or ours, as JSON values."""
    import hashlib

    def shape(s: Any) -> list[Any]:
        return [bool(s.unknown_rank), [int(d.size) for d in s.dim]]

    def tensor(t: Any) -> dict[str, Any]:
        vals = {f: list(getattr(t, f)) for f in ("half_val", "float_val", "double_val", "int_val", "int64_val",
                                                 "bool_val")}
        return {"dtype": int(t.dtype), "shape": shape(t.tensor_shape),
                "content": hashlib.sha256(t.tensor_content).hexdigest(), **vals}

    def attr(v: Any) -> list[Any]:
        kind = v.WhichOneof("value")
        if kind == "s":
            return [kind, v.s.hex()]
        if kind in ("i", "f", "b", "type", "placeholder"):
            return [kind, getattr(v, kind)]
        if kind == "shape":
            return [kind, shape(v.shape)]
        if kind == "tensor":
            return [kind, tensor(v.tensor)]
        if kind == "func":
            return [kind, v.func.name]
        if kind == "list":
            lst = v.list
            return [kind, {"s": [x.hex() for x in lst.s], "i": list(lst.i), "f": list(lst.f), "b": list(lst.b),
                           "type": list(lst.type), "shape": [shape(x) for x in lst.shape]}]
        return [kind]

    def node(n: Any) -> list[Any]:
        return [n.name, n.op, list(n.input), n.device, {k: attr(v) for k, v in sorted(n.attr.items())}]

    functions = [[f.signature.name, [a.name for a in f.signature.input_arg], [a.name for a in f.signature.output_arg],
                  [node(n) for n in f.node_def], sorted(f.ret.items())] for f in gdef.library.function]
    return {"producer": gdef.versions.producer, "nodes": [node(n) for n in gdef.node], "functions": functions}


# Run by TensorFlow's interpreter: argv = work folder. Our files there: shinkai_ours.pb and saved_model_ours.pb (the
# originals as parsed and re-serialised by our schema), schema.bin (our FileDescriptorProto), paths.json.
_TF_SCRIPT = '''
import json, os, sys
from pathlib import Path
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
from google.protobuf import descriptor_pb2, descriptor_pool, json_format
from tensorflow.core.framework import graph_pb2, types_pb2
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2, saved_object_graph_pb2, tensor_bundle_pb2

work = Path(sys.argv[1])
paths = json.loads((work / "paths.json").read_text())
out = {}

# (a) a tiny graph: Placeholder (shape attr), Const (tensor_content and a splat float_val), Conv2D (list, string,
# bool and type attrs), LeakyRelu (float), DepthToSpace (int), IdentityN (list of types), _output_shapes (shapes)
def tiny(x):
    w = tf.constant(np.arange(3 * 3 * 3 * 4, dtype=np.float32).reshape(3, 3, 3, 4) / 50.0)
    y = tf.nn.conv2d(x, w, strides=[1, 2, 2, 1], padding="SAME", dilations=[1, 1, 1, 1])
    y = tf.nn.leaky_relu(y + tf.constant(0.25, shape=[4]), alpha=0.125)
    y = tf.nn.depth_to_space(y, 2)
    a, b = tf.identity_n([y, tf.reshape(x, [1, 48, 8, 1])])
    return a, b
graph = tf.function(tiny).get_concrete_function(tf.TensorSpec([None, 16, 8, 3], tf.float32, name="x")).graph
gdef = graph.as_graph_def(add_shapes=True)
(work / "tiny.pb").write_bytes(gdef.SerializeToString())
(work / "tiny.json").write_text(json.dumps(json_format.MessageToDict(gdef)))
out["tiny"] = describe(gdef)
out["tiny_values"] = {n.name: tf.make_ndarray(n.attr["value"].tensor).tolist() for n in gdef.node if n.op == "Const"}

# (b) the original Shinkai .pb, and what our schema re-serialised from it and from a SavedModel
if paths.get("pb"):
    original = graph_pb2.GraphDef.FromString(Path(paths["pb"]).read_bytes())
    out["shinkai"] = describe(original)
    out["shinkai_round_trip"] = graph_pb2.GraphDef.FromString((work / "shinkai_ours.pb").read_bytes()) == original
if paths.get("saved_model"):
    original = saved_model_pb2.SavedModel.FromString(Path(paths["saved_model"]).read_bytes())
    ours = saved_model_pb2.SavedModel.FromString((work / "saved_model_ours.pb").read_bytes())
    out["saved_model_round_trip"] = ours == original

# (d) every declaration of ours against TensorFlow's own descriptors
pool = descriptor_pool.DescriptorPool()
pool.Add(descriptor_pb2.FileDescriptorProto.FromString((work / "schema.bin").read_bytes()))
ours_file = pool.FindFileByName(paths["schema_file"])
tf_pool = descriptor_pool.Default()
def facts(f):
    return {"number": f.number, "type": f.type, "repeated": f.label == f.LABEL_REPEATED if hasattr(f, "label")
            else f.is_repeated, "json": f.json_name, "packed": getattr(f, "is_packed", None),
            "message": f.message_type.full_name if f.message_type else None,
            "map": bool(f.message_type and f.message_type.GetOptions().map_entry),
            "enum": f.enum_type.full_name if f.enum_type else None,
            "oneof": f.containing_oneof.name if f.containing_oneof else None}
mismatches, checked = [], 0
def check(msg):
    global checked
    theirs = tf_pool.FindMessageTypeByName(msg.full_name)
    for f in msg.fields:
        checked += 1
        if f.name not in theirs.fields_by_name:
            mismatches.append(f"{msg.full_name}.{f.name}: not a field of TensorFlow's")
        elif facts(f) != facts(theirs.fields_by_name[f.name]):
            mismatches.append(f"{msg.full_name}.{f.name}: {facts(f)} != {facts(theirs.fields_by_name[f.name])}")
    for nested in msg.nested_types:
        check(nested)
for msg in ours_file.message_types_by_name.values():
    check(msg)
ours_enum = {v.name: v.number for v in ours_file.enum_types_by_name["DataType"].values}
tf_enum = {v.name: v.number for v in types_pb2.DataType.DESCRIPTOR.values}
if ours_enum != tf_enum:
    mismatches.append(f"DataType: ours {sorted(ours_enum.items())} != TensorFlow's {sorted(tf_enum.items())}")
out["mismatches"], out["fields_checked"] = mismatches, checked
(work / "tf.json").write_text(json.dumps(out))
'''


@pytest.fixture(scope="module")
def tf_side(tensorflow: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """TensorFlow's files and findings (see _TF_SCRIPT), in the folder they were written to."""
    work = tmp_path_factory.mktemp("tf_schema")
    paths: dict[str, str] = {"schema_file": tf_schema.FILE_NAME}
    if SHINKAI_PB.is_file():
        paths["pb"] = str(SHINKAI_PB)
        ours = tf_schema.GraphDef.FromString(SHINKAI_PB.read_bytes())
        (work / "shinkai_ours.pb").write_bytes(ours.SerializeToString(deterministic=True))
    if SAVED_MODEL.is_file():
        paths["saved_model"] = str(SAVED_MODEL)
        ours = tf_schema.SavedModel.FromString(SAVED_MODEL.read_bytes())
        (work / "saved_model_ours.pb").write_bytes(ours.SerializeToString(deterministic=True))
    (work / "schema.bin").write_bytes(tf_schema.file_descriptor_proto().SerializeToString())
    (work / "paths.json").write_text(json.dumps(paths))
    script = "from __future__ import annotations\nfrom typing import Any\n"
    script += textwrap.dedent(inspect.getsource(describe)) + _TF_SCRIPT
    proc = subprocess.run([tensorflow, "-c", script, str(work)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return work, json.loads((work / "tf.json").read_text())


def test_a_graph_written_by_tensorflow_reads_the_same_in_our_schema(tf_side: tuple[Path, dict[str, Any]]) -> None:
    from anipaint.importers.graphdef import tensor_to_numpy

    work, tf = tf_side
    ours = tf_schema.GraphDef.FromString((work / "tiny.pb").read_bytes())
    assert describe(ours) == tf["tiny"]
    ops = {n.op for n in ours.node}
    assert {"Placeholder", "Const", "Conv2D", "LeakyRelu", "DepthToSpace", "IdentityN", "Reshape"} <= ops, ops
    conv = next(n for n in ours.node if n.op == "Conv2D")
    assert list(conv.attr["strides"].list.i) == [1, 2, 2, 1]
    assert conv.attr["padding"].s == b"SAME" and conv.attr["T"].type == tf_schema.DT_FLOAT
    assert conv.attr["_output_shapes"].list.shape[0].dim[1].size == 8
    placeholder = next(n for n in ours.node if n.op == "Placeholder")
    assert [d.size for d in placeholder.attr["shape"].shape.dim] == [-1, 16, 8, 3]  # an unknown batch
    identity_n = next(n for n in ours.node if n.op == "IdentityN")
    assert [tf_schema.DataType.Name(t) for t in identity_n.attr["T"].list.type] == ["DT_FLOAT", "DT_FLOAT"]
    consts = {n.name: n for n in ours.node if n.op == "Const"}
    assert consts.keys() == tf["tiny_values"].keys()
    assert any(len(n.attr["value"].tensor.float_val) == 1 for n in consts.values())  # a splat
    assert any(n.attr["value"].tensor.tensor_content for n in consts.values())
    for name, node in consts.items():
        expected = np.asarray(tf["tiny_values"][name])
        np.testing.assert_array_equal(tensor_to_numpy(node.attr["value"].tensor), expected.astype(
            np.float32 if expected.dtype.kind == "f" else np.int32))

    # the same graph as protobuf JSON (a TF.js topology is one), JSON names included
    from_json = json_format.ParseDict(json.loads((work / "tiny.json").read_text()), tf_schema.GraphDef(),
                                      ignore_unknown_fields=True)
    assert describe(from_json) == tf["tiny"]


def test_the_original_pb_reads_the_same_in_our_schema_and_in_tensorflows(tf_side: tuple[Path, dict[str, Any]]
                                                                         ) -> None:
    _, tf = tf_side
    if "shinkai" not in tf:
        pytest.skip(f"{SHINKAI_PB} absent")
    from anipaint.importers.graphdef import read_pb

    ours = tf_schema.GraphDef.FromString(SHINKAI_PB.read_bytes())
    assert describe(ours) == tf["shinkai"]
    assert len(ours.node) == len(tf["shinkai"]["nodes"]) > 300
    assert read_pb(SHINKAI_PB).nodes
    # what we do not declare is kept: TensorFlow reads our re-serialisation as the original message
    assert tf["shinkai_round_trip"] is True
    if "saved_model_round_trip" in tf:
        assert tf["saved_model_round_trip"] is True


def test_our_declarations_are_tensorflows(tf_side: tuple[Path, dict[str, Any]]) -> None:
    """Field numbers, types, JSON names, packing, maps, oneofs and the DataType values, as TF's descriptors say."""
    _, tf = tf_side
    assert tf["mismatches"] == []
    assert tf["fields_checked"] > 40


def test_attributes_come_out_in_name_order() -> None:
    """Conversions are repeatable byte for byte: the IR's attributes do not follow the protobuf map's order."""
    from anipaint.importers.graphdef import translate

    gdef = tf_schema.GraphDef()
    x = gdef.node.add(name="x", op="Placeholder")
    x.attr["shape"].shape.dim.add(size=4)
    y = gdef.node.add(name="y", op="Relu", input=["x"])
    for key in ("zeta", "alpha", "mu"):
        y.attr[key].i = len(key)
    graph = translate(gdef, {}, outputs=None, meta={})
    assert list(graph.nodes[-1].attrs) == ["alpha", "mu", "zeta"]


def test_the_importers_do_not_import_tensorboard() -> None:
    code = ("import sys, anipaint.importers.graphdef, anipaint.importers.savedmodel; "
            "print(sorted(m for m in sys.modules if m.startswith(('tensorboard', 'tensorflow'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]"

