"""The official AnimeGANv2 TFLite file -> the named PyTorch network's state dict (the port's key names).

:func:`~anipaint.importers.tflite.read_tflite` gives the graph; here its convolutions and norms are matched to
:class:`~anipaint.networks.animeganv2.Generator`'s layers in graph order, each match checked by kind, shape and
stride, and the result loaded with ``strict=True``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from anipaint.importers.tflite import TFLiteImportError, read_tflite
from anipaint.networks.ir import Graph, Node


def _consumers(graph: Graph) -> dict[str, list[Node]]:
    users: dict[str, list[Node]] = {}
    for n in graph.nodes:
        for i in n.inputs:
            users.setdefault(i, []).append(n)
    return users


def _through_identity(name: str, users: dict[str, list[Node]]) -> list[Node]:
    """Consumers of ``name``, looking through Identity nodes (ex-QUANTIZE/DEQUANTIZE)."""
    out: list[Node] = []
    for n in users.get(name, []):
        out.extend(_through_identity(n.name, users) if n.op == "Identity" else [n])
    return out


def _producer_through_identity(graph: Graph, name: str, by_name: dict[str, Node]) -> Node | None:
    node = by_name.get(name)
    while node is not None and node.op == "Identity":
        node = by_name.get(node.inputs[0])
    return node


def v2_layers(graph: Graph) -> list[dict[str, Any]]:
    """The AnimeGANv2 graph's parameterised layers in graph order: convs (TF layout) and layer norms.

    Layer norms are found by their decomposition ``Rsqrt(var + eps) -> Mul(gamma) -> ... Sub(beta, ...)``.
    """
    users = _consumers(graph)
    by_name = {n.name: n for n in graph.nodes}
    layers: list[dict[str, Any]] = []
    for n in graph.nodes:
        if n.op in ("Conv2D", "DepthwiseConv2dNative"):
            bias = None
            for u in users.get(n.name, []):
                if u.op == "BiasAdd":
                    bias = graph.consts[u.inputs[1]]
            layers.append({"kind": "conv", "name": n.name, "op": n.op, "weight": graph.consts[n.inputs[1]],
                           "bias": bias, "strides": n.attrs["strides"]})
        elif n.op == "Rsqrt":
            add = _producer_through_identity(graph, n.inputs[0], by_name)
            eps = [graph.consts[i] for i in (add.inputs if add is not None and add.op in ("Add", "AddV2") else [])
                   if i in graph.consts]
            scale = [u for u in _through_identity(n.name, users) if u.op == "Mul"]
            gamma = [graph.consts[i] for u in scale for i in u.inputs if i in graph.consts]
            beta = [graph.consts[u.inputs[0]] for m in scale for mm in _through_identity(m.name, users)
                    if mm.op == "Mul" for u in _through_identity(mm.name, users)
                    if u.op == "Sub" and u.inputs[0] in graph.consts]
            if len(gamma) != 1 or len(beta) != 1 or len(eps) != 1:
                raise TFLiteImportError(f"layer norm at {n.name!r} does not have the expected gamma/beta/eps")
            layers.append({"kind": "norm", "name": n.name, "gamma": gamma[0], "beta": beta[0],
                           "eps": float(eps[0])})
    return layers


def v2_state_dict(graph: Graph) -> tuple[dict[str, Any], dict[str, Any]]:
    """Map the v2 graph's weights onto :class:`~anipaint.networks.animeganv2.Generator`'s keys.

    Both list their layers in network order (conv, norm, conv, norm, ...; depthwise convs carry a bias), so
    the mapping is by position, checked layer by layer on kind, shape and stride. Returns the state dict and
    facts (layer norm epsilon, TF names per key).
    """
    import torch
    from torch import nn

    from anipaint.networks import animeganv2

    layers = v2_layers(graph)
    model = animeganv2.Generator()
    modules = [(name, m) for name, m in model.named_modules() if isinstance(m, (nn.Conv2d, nn.GroupNorm))]
    if len(layers) != len(modules):
        raise TFLiteImportError(f"graph has {len(layers)} conv/norm layers, AnimeGANv2 has {len(modules)}")
    state: dict[str, torch.Tensor] = {}
    sources: dict[str, str] = {}
    eps_values = set()
    for layer, (name, module) in zip(layers, modules, strict=True):
        if isinstance(module, nn.Conv2d):
            if layer["kind"] != "conv":
                raise TFLiteImportError(f"{name}: expected a conv, graph has {layer['kind']} {layer['name']!r}")
            w = layer["weight"]
            # TF HWIO -> OIHW; depthwise [H, W, C, 1] -> [C, 1, H, W]
            w = w.transpose(2, 3, 0, 1) if layer["op"] == "DepthwiseConv2dNative" else w.transpose(3, 2, 0, 1)
            if tuple(w.shape) != tuple(module.weight.shape) or layer["strides"][1] != module.stride[0]:
                raise TFLiteImportError(f"{name}: graph conv {layer['name']!r} {w.shape} does not fit "
                                        f"{tuple(module.weight.shape)} stride {module.stride}")
            state[f"{name}.weight"] = torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32))
            sources[f"{name}.weight"] = layer["name"]
            if module.bias is not None:
                if layer["bias"] is None:
                    raise TFLiteImportError(f"{name}: graph conv {layer['name']!r} has no bias")
                state[f"{name}.bias"] = torch.from_numpy(layer["bias"].astype(np.float32))
                sources[f"{name}.bias"] = layer["name"]
            elif layer["bias"] is not None:
                raise TFLiteImportError(f"{name}: graph conv {layer['name']!r} has a bias the network lacks")
        else:
            if layer["kind"] != "norm" or layer["gamma"].shape != (module.num_channels,):
                raise TFLiteImportError(f"{name}: expected a {module.num_channels}-channel norm, "
                                        f"graph has {layer['kind']} {layer['name']!r}")
            state[f"{name}.weight"] = torch.from_numpy(layer["gamma"].astype(np.float32))
            state[f"{name}.bias"] = torch.from_numpy(layer["beta"].astype(np.float32))
            sources[f"{name}.weight"] = sources[f"{name}.bias"] = layer["name"]
            eps_values.add(layer["eps"])
    for eps in eps_values:  # the network hard-codes TF's epsilon; make sure this graph agrees
        if not np.isclose(eps, animeganv2.LAYER_NORM_EPS, rtol=0.05):
            raise TFLiteImportError(f"layer norm epsilon {eps:g} != network's {animeganv2.LAYER_NORM_EPS:g}")
    model.load_state_dict(state, strict=True)
    return model.state_dict(), {"layer_norm_eps": sorted(eps_values), "tf_names": sources}


def convert_v2(sources: list[Path], out_dir: Path) -> dict[str, Any]:
    """The official AnimeGANv2 TFLite file -> ``out_dir/model.pt``, a state dict in the PyTorch port's keys."""
    import torch

    graph = read_tflite(sources[0])
    state, facts = v2_state_dict(graph)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.save(state, out_dir / "model.pt")
    return {
        "parameters": int(sum(v.numel() for v in state.values())),
        "layer_norm_eps": facts["layer_norm_eps"][0],
        "source_format": "tflite",
        "notes": "int8 per-channel weights dequantized to float32 (within int8 rounding of the TF weights); "
                 "state dict keys as in bryandlee/animegan2-pytorch.",
    }
