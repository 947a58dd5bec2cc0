"""Reference outputs from the ORIGINAL model files, computed by TensorFlow / LiteRT (test-only helper).

Run as a subprocess so TensorFlow and torch never share a process:

    python tests/support/tf_reference.py KIND MODEL IN.npz OUT.npz

KIND is ``tfjs`` (model.json: the GraphDef JSON parsed into TensorFlow's own GraphDef, Const values
dequantized here from the manifest, independently of anipaint), ``pb`` (frozen GraphDef file), ``savedmodel``
(a TF2 SavedModel folder, its serving signature) or ``tflite`` (ai_edge_litert Interpreter on the file as is).
Every array in IN.npz is an NHWC float32 batch; OUT.npz holds
the output for each, under the same key.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _tfjs_graph_def(model_json: Path):  # noqa: ANN202 - TF types
    import tensorflow as tf
    from google.protobuf import json_format

    model = json.loads(model_json.read_text())
    gdef = json_format.ParseDict(model["modelTopology"], tf.compat.v1.GraphDef(), ignore_unknown_fields=True)
    values: dict[str, np.ndarray] = {}
    for group in model["weightsManifest"]:
        buf = b"".join((model_json.parent / p).read_bytes() for p in group["paths"])
        pos = 0
        for w in group["weights"]:
            n = int(np.prod(w["shape"]))
            q = w.get("quantization")
            if q:
                assert q["dtype"] == "uint8", q
                codes = np.frombuffer(buf, np.uint8, n, pos)
                pos += n
                v = (codes * q["scale"] + q["min"]).astype(np.float32)  # tfjs: float64 maths, float32 store
            else:
                dt = {"float32": np.float32, "int32": np.int32}[w["dtype"]]
                v = np.frombuffer(buf, dt, n, pos)
                pos += n * 4
            values[w["name"]] = v.reshape(w["shape"])
    for node in gdef.node:
        if node.op == "Const":
            node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(values[node.name]))
    out = [o["name"] for o in model["signature"]["outputs"].values()]
    inp = [i["name"] for i in model["signature"]["inputs"].values()]
    return gdef, inp[0], out[0]


def _run_graph_def(gdef, input_name: str, output_name: str, arrays: dict[str, np.ndarray]) -> dict:  # noqa: ANN001
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(gdef, name="")
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=1)
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        return {k: sess.run(output_name, {input_name: v}) for k, v in arrays.items()}


def main(kind: str, model: str, in_path: str, out_path: str) -> None:
    arrays = dict(np.load(in_path))
    if kind == "tfjs":
        gdef, inp, out = _tfjs_graph_def(Path(model))
        result = _run_graph_def(gdef, inp, out, arrays)
    elif kind == "pb":
        import tensorflow as tf

        gdef = tf.compat.v1.GraphDef()
        gdef.ParseFromString(Path(model).read_bytes())
        consumed = {i.split(":")[0].lstrip("^") for n in gdef.node for i in n.input}
        outs = [n.name for n in gdef.node if n.name not in consumed and n.op not in ("Const", "NoOp")]
        ins = [n.name for n in gdef.node if n.op == "Placeholder"]
        result = _run_graph_def(gdef, ins[0] + ":0", outs[0] + ":0", arrays)
    elif kind == "savedmodel":  # a TF2 SavedModel folder, run through its serving signature
        import tensorflow as tf

        serve = tf.saved_model.load(model).signatures["serving_default"]
        name = next(iter(serve.structured_input_signature[1]))
        result = {k: next(iter(serve(**{name: tf.constant(v)}).values())).numpy() for k, v in arrays.items()}
    elif kind == "tflite":
        from ai_edge_litert.interpreter import Interpreter

        result = {}
        for k, v in arrays.items():
            interp = Interpreter(model_path=model, num_threads=2)
            inp = interp.get_input_details()[0]
            if list(inp["shape"]) != list(v.shape):
                interp.resize_tensor_input(inp["index"], list(v.shape))
            interp.allocate_tensors()
            interp.set_tensor(inp["index"], v.astype(np.float32))
            interp.invoke()
            result[k] = interp.get_tensor(interp.get_output_details()[0]["index"]).copy()
    elif kind == "onnx":  # a published fp16 ONNX file, widened to fp32 for ONNX Runtime's CPU kernels
        import onnxruntime as ort

        from anipaint.cli.bench.styles import widen_fp16

        session = ort.InferenceSession(widen_fp16(Path(model)).SerializeToString(), providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        result = {k: session.run(None, {name: v.astype(np.float32)})[0] for k, v in arrays.items()}
    else:
        raise SystemExit(f"unknown kind {kind}")
    np.savez(out_path, **result)


if __name__ == "__main__":
    main(*sys.argv[1:5])
