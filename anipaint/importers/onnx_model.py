"""ONNX models (AnimeGANv3 tiny Cute): validated and copied as is; run by ONNX Runtime.

The artefact is the original file (``model.onnx``); :class:`anipaint.networks.onnx_generator.OnnxGenerator`
runs it. Conversion only checks the model and records the facts the runner needs.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from anipaint.networks.onnx_generator import model_size_multiple


def convert(sources: list[Path], out_dir: Path) -> dict[str, Any]:
    """Validate with ``onnx.checker`` and copy to ``out_dir/model.onnx``; return opset, input, parameters."""
    src = Path(sources[0])
    model = onnx.load(str(src))
    onnx.checker.check_model(model)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, out_dir / "model.onnx")
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializers]
    dims = [d.dim_value or d.dim_param for d in inputs[0].type.tensor_type.shape.dim]
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    return {
        "format": "onnx",
        "opset": opset,
        "input": inputs[0].name,
        "input_shape": [d if isinstance(d, int) else str(d) for d in dims],
        "output": graph.output[0].name,
        "parameters": int(sum(int(np.prod(t.dims)) for t in graph.initializer if t.data_type == 1)),
        "size_multiple": model_size_multiple(model),
        "producer": model.producer_name,
    }
