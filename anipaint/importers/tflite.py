"""TFLite flatbuffers -> the graph IR (:mod:`anipaint.networks.ir`), and the converters built on it.

:class:`~.tflite_reader.Reader` reads tensors and dequantizes constants; each builtin op is translated by its entry
in the op table :data:`.tflite_ops.OPS` into TensorFlow's op vocabulary with TF layouts. Then named IR passes
(:mod:`.ir_passes`) run, each listed in ``Graph.meta["passes"]``:

* ``dynamic_resizes`` / ``dynamic_reshapes``: TFLite bakes the converter's input size into ``RESHAPE`` shapes and
  ``RESIZE_BILINEAR`` sizes; they become shape arithmetic on the live tensors, so the graph runs at any input size
  (each rewrite in ``meta["rewrites"]``);
* ``restore_flushed_epsilons``: epsilons the float16 export flushed to zero are put back (``meta["repairs"]``);
* ``drop_unread_consts``: filters re-laid under new names, skipped all-zero biases.

The converters: :func:`convert_graph` (AnimeGANv3 Hayao, the selfie segmenter) saves the graph;
:func:`convert_whitebox` also runs ``live_input_sized_ones`` and ``append_clip`` (see its docstring).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from tflite.utils import BUILTIN_OPCODE2NAME

from anipaint.importers import ir_passes
from anipaint.importers.tflite_ops import OPS, OPTIONS
from anipaint.importers.tflite_reader import Reader, TFLiteImportError
from anipaint.networks.ir import Graph

__all__ = ["TFLiteImportError", "convert_graph", "convert_whitebox", "read_tflite"]


def read_tflite(path: Path | str) -> Graph:
    """Read a TFLite flatbuffer into the IR: float32 weights, TF ops and layouts, size-independent shapes."""
    r = Reader(Path(path))
    op_counts: Counter[str] = Counter()
    for k in range(r.sg.InputsLength()):
        r.placeholder(r.sg.Inputs(k))
    for k in range(r.sg.OperatorsLength()):
        op = r.sg.Operators(k)
        code = r.model.OperatorCodes(op.OpcodeIndex())
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        kind = BUILTIN_OPCODE2NAME.get(builtin, str(builtin))
        if kind == "CUSTOM":
            kind = f"CUSTOM:{code.CustomCode().decode()}"
        op_counts[kind] += 1
        ins = [op.Inputs(j) for j in range(op.InputsLength())]
        outs = [op.Outputs(j) for j in range(op.OutputsLength())]
        if kind not in OPS:
            name = r.tensor_name(outs[0]) if outs else "?"
            raise r.error(f"TFLite op {kind} ({name!r}) is not supported")
        opts: Any = None
        if kind.startswith("CUSTOM:"):
            opts = op.CustomOptionsAsNumpy() if op.CustomOptionsLength() else b""
        elif kind in OPTIONS and op.BuiltinOptions() is not None:
            table = op.BuiltinOptions()
            opts = OPTIONS[kind]()
            opts.Init(table.Bytes, table.Pos)
        r.kind = kind
        OPS[kind](r, ins, outs, opts)
    graph = r.finish()
    graph.meta.update({"rewrites": [], "repairs": [], "fixed_size_ops": [], "passes": []})
    ir_passes.dynamic_resizes(graph, r.static_shape)
    ir_passes.dynamic_reshapes(graph, r.static_shape)
    ir_passes.restore_flushed_epsilons(graph, r.fp16_consts)
    ir_passes.drop_unread_consts(graph)
    smallest = min((s[1] for n, s in r.static_shape.items() if len(s) == 4 and n in r.producer and s[1] > 1),
                   default=0)
    in_shape = r.shape(r.sg.Inputs(0))
    graph.meta.update({
        "source_format": "tflite",
        "source": r.path.name,
        "layout": "NHWC",
        "input_shape": in_shape,  # the size the file was exported for (graph_shapes reads this key)
        "tflite_ops": dict(sorted(op_counts.items())),
        # the network's total stride: H and W should be multiples of it for the 2x upsamples to line up
        "size_multiple": int(in_shape[1] // smallest) if smallest and len(in_shape) == 4 else 1,
        "notes": (
            "Weights dequantized to float32; activation QUANTIZE/DEQUANTIZE became Identity. "
            "Constant RESHAPE shapes and RESIZE_BILINEAR sizes rewritten to follow the live input size."
        ),
    })
    return graph


def _save(graph: Graph, out_dir: Path) -> dict[str, Any]:
    from anipaint.networks.graph_module import GraphModule, save_graph

    GraphModule(graph)  # fails here, not at first use, if the executor lacks an op
    out_dir.mkdir(parents=True, exist_ok=True)
    save_graph(graph, out_dir / "model.pt")
    return {
        "parameters": graph.parameter_count(),
        "source_format": "tflite",
        "size_multiple": graph.meta["size_multiple"],
        "rewrites": len(graph.meta["rewrites"]),
        "fixed_size_ops": list(graph.meta["fixed_size_ops"]),
        "passes": list(graph.meta["passes"]),
        "notes": graph.meta["notes"],
    }


def convert_graph(sources: list[Path], out_dir: Path) -> dict[str, Any]:
    """A TFLite network run by the graph executor -> ``out_dir/model.pt`` holding ``Graph.to_dict()``."""
    return _save(read_tflite(sources[0]), Path(out_dir))


def convert_whitebox(sources: list[Path], out_dir: Path) -> dict[str, Any]:
    """White-box Cartoonization. The file already holds the original project's guided filter (radius 1,
    eps 5e-3, guide: the input photo) after the generator, with the box means' pixel counts computed from a
    constant 512x512 map of ones; that map is rebuilt from the live input (any size), and the clip to [-1, 1]
    that the original applies after the filter is appended."""
    graph = read_tflite(sources[0])
    ir_passes.live_input_sized_ones(graph)
    ir_passes.append_clip(graph, -1.0, 1.0)
    graph.meta["notes"] += " Guided filter kept from the file; output " + graph.meta["postprocess"] + "."
    return {**_save(graph, Path(out_dir)), "postprocess": graph.meta["postprocess"]}
