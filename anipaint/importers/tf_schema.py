"""TensorFlow's protobuf messages, as far as the importers read them: our own minimal schema of TF's wire format.

Frozen GraphDefs (``.pb``), TF.js topologies (a GraphDef written as protobuf JSON) and SavedModels
(``saved_model.pb``, and the ``BundleEntryProto`` records of the ``variables.index`` tensor bundle) are protobuf
messages defined by TensorFlow's ``.proto`` files. Rather than carry a package that ships all of them (tensorboard,
25 MB, used only for this), this module declares just the messages and fields the importers read, each with
TensorFlow's field number, type, JSON name, map/oneof shape and packing (the files are proto3), builds them into a
private :class:`~google.protobuf.descriptor_pool.DescriptorPool` and asks protobuf for the message classes. What a
file holds beyond these fields is kept as unknown fields and never looked at; ``json_format.ParseDict(...,
ignore_unknown_fields=True)`` skips it likewise.

Followed, in package ``tensorflow``: tensorflow/core/framework/ ``types.proto`` (DataType), ``tensor_shape.proto``,
``tensor.proto``, ``attr_value.proto``, ``node_def.proto``, ``versions.proto``, ``op_def.proto``,
``function.proto``, ``graph.proto``; tensorflow/core/protobuf/ ``trackable_object_graph.proto``,
``saved_object_graph.proto``, ``meta_graph.proto``, ``saved_model.proto``, ``tensor_bundle.proto``.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

_PACKAGE = "tensorflow"
FILE_NAME = "anipaint/importers/tf_schema.proto"  # its name in POOL

# types.proto: DataType, numbered by position; each type T but DT_INVALID also has T_REF = T + 100
_DATA_TYPES = (
    "DT_INVALID", "DT_FLOAT", "DT_DOUBLE", "DT_INT32", "DT_UINT8", "DT_INT16", "DT_INT8", "DT_STRING",
    "DT_COMPLEX64", "DT_INT64", "DT_BOOL", "DT_QINT8", "DT_QUINT8", "DT_QINT32", "DT_BFLOAT16", "DT_QINT16",
    "DT_QUINT16", "DT_UINT16", "DT_COMPLEX128", "DT_HALF", "DT_RESOURCE", "DT_VARIANT", "DT_UINT32", "DT_UINT64",
    "DT_FLOAT8_E5M2", "DT_FLOAT8_E4M3FN", "DT_FLOAT8_E4M3FNUZ", "DT_FLOAT8_E4M3B11FNUZ", "DT_FLOAT8_E5M2FNUZ",
    "DT_INT4", "DT_UINT4", "DT_INT2", "DT_UINT2", "DT_FLOAT4_E2M1FN",
)
_REF_OFFSET = 100

# message (nested ones as Outer.Inner) -> its fields we read: (name, number, type[, oneof]). A type is a scalar
# (string, bytes, bool, int32, int64, float, double), DataType, or a message of this table; "repeated T" and
# "map<K, V>" as in a .proto file. A message listed with no fields only holds nested ones.
_MESSAGES: dict[str, list[tuple[Any, ...]]] = {
    # tensorflow/core/framework/tensor_shape.proto
    "TensorShapeProto": [("dim", 2, "repeated TensorShapeProto.Dim"), ("unknown_rank", 3, "bool")],
    "TensorShapeProto.Dim": [("size", 1, "int64")],
    # tensorflow/core/framework/tensor.proto
    "TensorProto": [
        ("dtype", 1, "DataType"),
        ("tensor_shape", 2, "TensorShapeProto"),
        ("tensor_content", 4, "bytes"),
        ("half_val", 13, "repeated int32"),  # float16 bit patterns
        ("float_val", 5, "repeated float"),
        ("double_val", 6, "repeated double"),
        ("int_val", 7, "repeated int32"),
        ("int64_val", 10, "repeated int64"),
        ("bool_val", 11, "repeated bool"),
    ],
    # tensorflow/core/framework/attr_value.proto
    "AttrValue": [
        ("s", 2, "bytes", "value"),
        ("i", 3, "int64", "value"),
        ("f", 4, "float", "value"),
        ("b", 5, "bool", "value"),
        ("type", 6, "DataType", "value"),
        ("shape", 7, "TensorShapeProto", "value"),
        ("tensor", 8, "TensorProto", "value"),
        ("list", 1, "AttrValue.ListValue", "value"),
        ("func", 10, "NameAttrList", "value"),
        ("placeholder", 9, "string", "value"),
    ],
    "AttrValue.ListValue": [
        ("s", 2, "repeated bytes"),
        ("i", 3, "repeated int64"),
        ("f", 4, "repeated float"),
        ("b", 5, "repeated bool"),
        ("type", 6, "repeated DataType"),
        ("shape", 7, "repeated TensorShapeProto"),
    ],
    "NameAttrList": [("name", 1, "string")],
    # tensorflow/core/framework/node_def.proto
    "NodeDef": [
        ("name", 1, "string"),
        ("op", 2, "string"),
        ("input", 3, "repeated string"),
        ("device", 4, "string"),
        ("attr", 5, "map<string, AttrValue>"),
    ],
    # tensorflow/core/framework/versions.proto
    "VersionDef": [("producer", 1, "int32")],
    # tensorflow/core/framework/op_def.proto
    "OpDef": [("name", 1, "string"), ("input_arg", 2, "repeated OpDef.ArgDef"),
              ("output_arg", 3, "repeated OpDef.ArgDef")],
    "OpDef.ArgDef": [("name", 1, "string")],
    # tensorflow/core/framework/function.proto
    "FunctionDefLibrary": [("function", 1, "repeated FunctionDef")],
    "FunctionDef": [("signature", 1, "OpDef"), ("node_def", 3, "repeated NodeDef"),
                    ("ret", 4, "map<string, string>")],
    # tensorflow/core/framework/graph.proto
    "GraphDef": [("node", 1, "repeated NodeDef"), ("versions", 4, "VersionDef"),
                 ("library", 2, "FunctionDefLibrary")],
    # tensorflow/core/protobuf/trackable_object_graph.proto
    "TrackableObjectGraph": [],
    "TrackableObjectGraph.TrackableObject": [],
    "TrackableObjectGraph.TrackableObject.ObjectReference": [("node_id", 1, "int32"), ("local_name", 2, "string")],
    # tensorflow/core/protobuf/saved_object_graph.proto
    "SavedObjectGraph": [("nodes", 1, "repeated SavedObject")],
    "SavedObject": [("children", 1, "repeated TrackableObjectGraph.TrackableObject.ObjectReference"),
                    ("variable", 7, "SavedVariable", "kind")],
    "SavedVariable": [("name", 6, "string")],
    # tensorflow/core/protobuf/meta_graph.proto
    "TensorInfo": [("name", 1, "string", "encoding")],
    "SignatureDef": [("inputs", 1, "map<string, TensorInfo>"), ("outputs", 2, "map<string, TensorInfo>")],
    "MetaGraphDef": [("graph_def", 2, "GraphDef"), ("signature_def", 5, "map<string, SignatureDef>"),
                     ("object_graph_def", 7, "SavedObjectGraph")],
    # tensorflow/core/protobuf/saved_model.proto
    "SavedModel": [("meta_graphs", 2, "repeated MetaGraphDef")],
    # tensorflow/core/protobuf/tensor_bundle.proto
    "BundleHeaderProto": [("num_shards", 1, "int32")],
    "BundleEntryProto": [("dtype", 1, "DataType"), ("shape", 2, "TensorShapeProto"), ("shard_id", 3, "int32"),
                         ("offset", 4, "int64"), ("size", 5, "int64")],
}

_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {"string": _F.TYPE_STRING, "bytes": _F.TYPE_BYTES, "bool": _F.TYPE_BOOL, "int32": _F.TYPE_INT32,
            "int64": _F.TYPE_INT64, "float": _F.TYPE_FLOAT, "double": _F.TYPE_DOUBLE}


def _json_name(name: str) -> str:
    """protoc's default JSON name: lowerCamelCase (``tensor_content`` -> ``tensorContent``)."""
    first, *rest = name.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


def _set_type(field: descriptor_pb2.FieldDescriptorProto, type_: str) -> None:
    if type_ in _SCALARS:
        field.type = _SCALARS[type_]
    else:
        field.type = _F.TYPE_ENUM if type_ == "DataType" else _F.TYPE_MESSAGE
        field.type_name = f".{_PACKAGE}.{type_}"


def _add_field(msg: descriptor_pb2.DescriptorProto, path: str, spec: tuple[Any, ...]) -> None:
    name, number, type_, *oneof = spec
    field = msg.field.add(name=name, number=number, json_name=_json_name(name), label=_F.LABEL_OPTIONAL)
    if type_.startswith("map<"):  # a repeated nested XxxEntry {key = 1; value = 2;} marked as a map entry
        key, value = (t.strip() for t in type_[4:-1].split(","))
        entry = msg.nested_type.add(name="".join(p.capitalize() for p in name.split("_")) + "Entry")
        entry.options.map_entry = True
        for k, (entry_name, entry_type) in enumerate((("key", key), ("value", value)), 1):
            _set_type(entry.field.add(name=entry_name, number=k, json_name=entry_name, label=_F.LABEL_OPTIONAL),
                      entry_type)
        field.label = _F.LABEL_REPEATED
        type_ = f"{path}.{entry.name}"
    elif type_.startswith("repeated "):
        field.label = _F.LABEL_REPEATED
        type_ = type_.removeprefix("repeated ")
    _set_type(field, type_)
    if oneof:
        names = [o.name for o in msg.oneof_decl]
        if oneof[0] not in names:
            msg.oneof_decl.add(name=oneof[0])
            names.append(oneof[0])
        field.oneof_index = names.index(oneof[0])


def _add_message(msg: descriptor_pb2.DescriptorProto, path: str) -> None:
    msg.name = path.rpartition(".")[2]
    for spec in _MESSAGES[path]:
        _add_field(msg, path, spec)
    for child in _MESSAGES:
        if child.rpartition(".")[0] == path:
            _add_message(msg.nested_type.add(), child)


def file_descriptor_proto() -> descriptor_pb2.FileDescriptorProto:
    """The schema as one proto3 file of package ``tensorflow`` (what protoc would make of the table)."""
    proto = descriptor_pb2.FileDescriptorProto(name=FILE_NAME, package=_PACKAGE, syntax="proto3")
    enum = proto.enum_type.add(name="DataType")
    for number, name in enumerate(_DATA_TYPES):
        enum.value.add(name=name, number=number)
    for number, name in enumerate(_DATA_TYPES[1:], 1 + _REF_OFFSET):
        enum.value.add(name=f"{name}_REF", number=number)
    for path in _MESSAGES:
        if "." not in path:
            _add_message(proto.message_type.add(), path)
    return proto


POOL = descriptor_pool.DescriptorPool()
POOL.Add(file_descriptor_proto())


def _message(name: str) -> Any:
    return message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"{_PACKAGE}.{name}"))


DataType = EnumTypeWrapper(POOL.FindEnumTypeByName(f"{_PACKAGE}.DataType"))
DT_FLOAT: int = DataType.Value("DT_FLOAT")
DT_DOUBLE: int = DataType.Value("DT_DOUBLE")
DT_HALF: int = DataType.Value("DT_HALF")
DT_INT32: int = DataType.Value("DT_INT32")
DT_INT64: int = DataType.Value("DT_INT64")
DT_UINT8: int = DataType.Value("DT_UINT8")
DT_INT8: int = DataType.Value("DT_INT8")
DT_BOOL: int = DataType.Value("DT_BOOL")

TensorShapeProto = _message("TensorShapeProto")
TensorProto = _message("TensorProto")
AttrValue = _message("AttrValue")
NodeDef = _message("NodeDef")
FunctionDef = _message("FunctionDef")
GraphDef = _message("GraphDef")
MetaGraphDef = _message("MetaGraphDef")
SavedModel = _message("SavedModel")
BundleHeaderProto = _message("BundleHeaderProto")
BundleEntryProto = _message("BundleEntryProto")
