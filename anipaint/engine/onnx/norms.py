"""Rewrites of an exported ONNX graph's normalisations into the operators ONNX Runtime has single kernels for.

The exporter writes each of AnimeGANv3's norms as the element-wise chain the network computes,
``(a - mean(a)) / sqrt(mean((a - mean(a))²) + eps) * s + m``: ten operators and about seven passes over a
full-size activation. ONNX Runtime Web's WebAssembly kernels are 128-bit SIMD, so such passes cost the browser
relatively more than convolutions. :func:`fuse_instance_norms` replaces each chain with one
``InstanceNormalization(a, s, m)`` (its statistics in float32 and, like the chain, from the centred values), and
:func:`pooled_means` writes the remaining per-channel means as ``GlobalAveragePool`` and squares as ``Mul``.
Both are exact up to float rounding; the device model checks the result against the unrewritten file anyway.

The per-instance scale ``s`` and shift ``m`` (here another activation's spread and mean) become the operator's
per-channel inputs by flattening, which holds for a batch of one: the device models' input is ``[1, 3, H, W]``.
"""

from __future__ import annotations

import numpy as np


def graph_index(graph) -> tuple[dict, dict, dict]:
    from onnx import numpy_helper

    producer = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    constants = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return producer, consumers, constants


def _is_spatial_mean(node, constants: dict) -> bool:
    if node is None or node.op_type != "ReduceMean" or len(node.input) != 2 or node.input[1] not in constants:
        return False
    keepdims = next((a.i for a in node.attribute if a.name == "keepdims"), 1)
    return keepdims == 1 and sorted(int(v) for v in constants[node.input[1]].reshape(-1)) in ([2, 3], [-2, -1])


def scalar_of(constants: dict, name: str) -> float | None:
    value = constants.get(name)
    return float(value.reshape(-1)[0]) if value is not None and value.size == 1 else None


def _other(node, name: str) -> str:
    return node.input[1] if node.input[0] == name else node.input[0]


def _match_norm(mul, producer: dict, consumers: dict, constants: dict, outputs: set) -> dict | None:
    """The chain ending in ``mul`` = (a - mean a) * 1/sqrt(mean((a - mean a)^2) + eps) (or ``Div`` by the root, as
    AnimeGANv3's Shinkai graph has it), then * s, + m."""
    get = producer.get
    sub, recip = get(mul.input[0]), get(mul.input[1])
    if mul.op_type == "Div":
        sqrt, spread = recip, []
    elif recip is not None and recip.op_type == "Reciprocal":
        sqrt, spread = get(recip.input[0]), [recip]
    else:
        return None
    if sub is None or sub.op_type != "Sub":
        return None
    a, mean = sub.input[0], get(sub.input[1])
    if not _is_spatial_mean(mean, constants) or mean.input[0] != a:
        return None
    add_eps = get(sqrt.input[0]) if sqrt is not None and sqrt.op_type == "Sqrt" else None
    if add_eps is None or add_eps.op_type != "Add":
        return None
    var = get(add_eps.input[0])
    eps = scalar_of(constants, add_eps.input[1])
    if not _is_spatial_mean(var, constants) or eps is None:
        return None
    square = get(var.input[0])
    if square is None or square.input[0] != sub.output[0] or not (
        (square.op_type == "Pow" and scalar_of(constants, square.input[1]) == 2.0)
        or (square.op_type == "Mul" and square.input[1] == sub.output[0])
    ):
        return None
    scaled = consumers.get(mul.output[0], [])
    if len(scaled) != 1 or scaled[0].op_type != "Mul":
        return None
    shifted = consumers.get(scaled[0].output[0], [])
    if len(shifted) != 1 or shifted[0].op_type != "Add":
        return None
    inner = [mul, scaled[0], sub, *spread, sqrt, add_eps, var, square]
    private = {n.output[0] for n in inner}
    if private & outputs or any(c not in inner + shifted for name in private for c in consumers.get(name, [])):
        return None  # an intermediate value is used outside the chain: leave it
    if len(consumers.get(mean.output[0], [])) == 1 and mean.output[0] not in outputs:
        inner.append(mean)
    return {"a": a, "eps": eps, "scale": _other(scaled[0], mul.output[0]),
            "shift": _other(shifted[0], scaled[0].output[0]), "last": shifted[0], "drop": inner}


def fuse_instance_norms(model) -> int:
    """Replace each norm chain in ``model`` (an ``onnx.ModelProto``, batch of one) with ``InstanceNormalization``,
    in place; returns how many were replaced."""
    from onnx import helper, numpy_helper

    graph = model.graph
    producer, consumers, constants = graph_index(graph)
    outputs = {out.name for out in graph.output}
    found = [m for n in graph.node if n.op_type in ("Mul", "Div")
             for m in [_match_norm(n, producer, consumers, constants, outputs)] if m]
    if not found:
        return 0
    flat = "instance_norm/flat"
    graph.initializer.append(numpy_helper.from_array(np.array([-1], np.int64), flat))
    drop = {id(n) for m in found for n in m["drop"]}
    at_last = {id(m["last"]): (i, m) for i, m in enumerate(found)}
    nodes = []
    for node in graph.node:
        if id(node) in at_last:
            i, m = at_last[id(node)]
            name = f"instance_norm_{i}"
            nodes += [
                helper.make_node("Reshape", [m["scale"], flat], [f"{name}/scale"], name=f"{name}/scale"),
                helper.make_node("Reshape", [m["shift"], flat], [f"{name}/shift"], name=f"{name}/shift"),
                helper.make_node("InstanceNormalization", [m["a"], f"{name}/scale", f"{name}/shift"],
                                 list(node.output), name=name, epsilon=m["eps"]),
            ]
        elif id(node) not in drop:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    drop_unused_initializers(graph)
    return len(found)


def pooled_means(model) -> int:
    """Per-channel means over H and W (``ReduceMean`` keeping dims) → ``GlobalAveragePool``, and ``Pow(x, 2)`` →
    ``Mul(x, x)``, in place; returns how many nodes were rewritten."""
    from onnx import helper

    graph = model.graph
    _, _, constants = graph_index(graph)
    rewritten = 0
    for i, node in enumerate(graph.node):
        name = node.name or f"rewritten_{i}"
        if _is_spatial_mean(node, constants):
            graph.node[i].CopyFrom(helper.make_node("GlobalAveragePool", [node.input[0]], list(node.output), name=name))
        elif node.op_type == "Pow" and scalar_of(constants, node.input[1]) == 2.0:
            graph.node[i].CopyFrom(helper.make_node("Mul", [node.input[0]] * 2, list(node.output), name=name))
        else:
            continue
        rewritten += 1
    drop_unused_initializers(graph)
    return rewritten


def drop_unused_initializers(graph) -> None:
    used = {name for node in graph.node for name in node.input} | {out.name for out in graph.output}
    kept = [init for init in graph.initializer if init.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
