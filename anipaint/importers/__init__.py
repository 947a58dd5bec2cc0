"""Converters from original model formats into the model store's artefacts.

Each converter takes the verified source files (in the order the registry lists them) and an output folder,
writes the artefact there (``model.pt``), and returns a small dict of facts for the
store's ``meta.json`` (parameter count, notes). :func:`convert` dispatches on the registry's ``importer``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

# importer name -> "module:function"; modules are imported lazily so `anipaint styles` stays fast.
CONVERTERS: dict[str, str] = {
    "tflite_v2": "anipaint.importers.tflite_v2:convert_v2",
    "tflite_graph": "anipaint.importers.tflite:convert_graph",
    "tflite_whitebox": "anipaint.importers.tflite:convert_whitebox",
    "tfjs_v1": "anipaint.importers.graphdef:convert_tfjs_v1",
    "graphdef_pb": "anipaint.importers.graphdef:convert_pb",
    "torch_port": "anipaint.importers.torch_port:convert",
    "onnx_graph": "anipaint.importers.onnx_graph:convert_graph",
    "saved_model": "anipaint.importers.savedmodel:convert",
}


def converter(importer: str) -> Callable[[list[Path], Path], dict[str, Any]]:
    module_name, func = CONVERTERS[importer].split(":")
    return getattr(importlib.import_module(module_name), func)


def convert(importer: str, sources: list[Path], out_dir: Path) -> dict[str, Any]:
    return converter(importer)(sources, out_dir)
