"""Rows for the compiled form's rewrites, one step at a time: v3-hayao's package built with none of
:data:`~anipaint.engine.compile.graph_program.REWRITES`, then with each added in turn (in the order of that
tuple), timed end to end at 512 px in turns with ONNX Runtime on the published ONNX, as
:mod:`anipaint.cli.bench.styles` times the served engine. Each row's PSNR is against the eager network.

Six AOTInductor builds, about a minute each on two cores, in a temporary folder the run removes.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from anipaint.cli.bench.measure import Row, fmt, one_call_profile, pipeline, tensor_painter

STYLE = "v3-hayao"


def step_rows(settings, photo: bytes, rounds: int) -> list[Row]:
    """A row per cumulative step, and the anchor's; none if the style is not available here."""
    from anipaint import imaging, preprocess
    from anipaint.cli.bench.styles import anchors
    from anipaint.engine import backends, load_network
    from anipaint.engine.compile import graph_program
    from anipaint.engine.compile.precision import fast_conv_dtype
    from anipaint.engine.runners import CompiledBackend
    from anipaint.engine.runtime import timing
    from anipaint.engine.runtime.progress import quiet
    from anipaint.models import store
    from anipaint.models.registry import get_style
    from anipaint.quality import psnr

    style = get_style(STYLE)
    if store.convert([STYLE], settings).get(STYLE) != "ok":
        return [Row(f"{STYLE} compiled-form steps", float("nan"), note="not available here")]
    artefact = store.artefact_path(style, settings)
    network = load_network(style, artefact)
    dtype = fast_conv_dtype()
    work_hw = preprocess.to_work_image(imaging.load_image(photo), 512).rgb.shape[:2]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="anipaint-steps-") as tmp:
        runs = {}
        for k in range(len(graph_program.REWRITES) + 1):
            label = f"{STYLE} compiled, " + ("no rewrites" if k == 0 else f"+ {graph_program.REWRITES[k - 1]}")
            print(f"building {label} …", file=sys.stderr, flush=True)
            path = Path(tmp) / f"step{k}.pt2"
            with quiet():
                multiple = graph_program.build_package(network, path, dtype, graph_program.REWRITES[:k])
            runs[label] = pipeline(photo, tensor_painter(CompiledBackend(path, multiple=multiple)))
        ort = anchors(STYLE, network, settings, work_hw)["onnxruntime"]
        runs["onnxruntime"] = pipeline(photo, tensor_painter(ort))
        eager = pipeline(photo, tensor_painter(backends.open_named("torch", style, artefact, settings, network)))()
        pictures = {name: run() for name, run in runs.items()}  # warm-up, and the pictures for PSNR
        times = timing.alternate(runs, rounds=rounds)
        anchor = times["onnxruntime"].seconds
        for name, t in times.items():
            cpu, rss = one_call_profile(runs[name])
            note = f"{str(dtype).removeprefix('torch.')} convolutions" if name != "onnxruntime" else "published ONNX"
            rows.append(Row(f"{name}" if name != "onnxruntime" else f"{STYLE}: onnxruntime (steps' anchor)",
                            t.seconds, anchor / t.seconds, cpu, rss, psnr(pictures[name], eager), t.foreign, note))
            print(fmt([rows[-1]]).splitlines()[-1], file=sys.stderr, flush=True)
    return rows
