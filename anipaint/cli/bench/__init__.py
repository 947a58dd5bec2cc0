"""``anipaint bench``: the speed tables, measured on this machine.

Four tables. The first two time each row end to end on a 512 px photo (JPEG decode → resize → style → PNG
encode) in turns with its yardstick in the same process (:mod:`anipaint.cli.bench.measure`):

* :mod:`anipaint.cli.bench.v2_table`: AnimeGANv2 Hayao, one row per optimisation step against the plain eager fp32
  reference, then picture sizes, 4096 px exact and tiled, and faces;
* :mod:`anipaint.cli.bench.styles`: the default v3-hayao, v3-shinkai and v1-hayao, every backend of each against
  ONNX Runtime (and LiteRT where installed) running the same network, and faces on/off and portrait mode with the
  default style; then :mod:`anipaint.cli.bench.compiled_steps`, v3-hayao's package with the compiled form's rewrites
  added one at a time;
* :mod:`anipaint.cli.bench.full_table`: exact full resolution per strip style (v3-hayao, v3-shinkai, v2, v1), the
  strip executor against one whole-picture pass (time, PSNR), and 4096 px in a child process for its peak RSS;
* :mod:`anipaint.cli.bench.video_table`: a real clip at 512 px with the default style, frames per second with
  temporal consistency off and on.

Columns: median seconds per picture, ratio (yardstick ÷ row: 3.0 = three times faster), CPU % (100 = one core),
peak RSS of one call (MB), PSNR against the yardstick's picture, and "noise", the share of the cores other
processes used meanwhile. ``--json PATH`` also writes everything as JSON, ``--profile`` a cProfile and an
operator profile of one 512 px paint, ``--quick`` fewer repeats and smaller full-resolution pictures,
``--only v2|styles|full|video`` one table.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

from anipaint.cli.bench.measure import Row, fmt, machine, photo_bytes
from anipaint.settings import Settings, get_settings

TABLES = ("v2", "styles", "full", "video")


def main(args, settings: Settings | None = None) -> int:
    """Run the tables; ``settings`` as the CLI resolved them (default: from the environment)."""
    from anipaint.cli.bench.compiled_steps import step_rows
    from anipaint.cli.bench.full_table import full_rows
    from anipaint.cli.bench.styles import style_rows
    from anipaint.cli.bench.v2_table import profile, v2_rows
    from anipaint.cli.bench.video_table import video_rows
    from anipaint.engine.runtime import threads
    quick = bool(getattr(args, "quick", False))
    only = getattr(args, "only", None)
    rounds = 2 if quick else 3
    settings = settings or get_settings()
    threads.configure(settings.jobs, settings.threads)
    # children and get_painter() see the same store
    os.environ.update({"ANIPAINT_HOME": str(settings.home), "ANIPAINT_SOURCES": str(settings.sources)})
    started = time.perf_counter()
    photo = photo_bytes(settings)
    rows: list[Row] = []
    report: dict = {}
    painter = None
    if only in (None, "v2"):
        v2, report["auto"], painter = v2_rows(settings, photo, rounds, quick)
        rows += v2
    if only in (None, "styles"):
        styled, report["auto_styles"] = style_rows(settings, photo, rounds)
        rows += styled + step_rows(settings, photo, rounds)
    if only in (None, "full"):
        rows += full_rows(settings, rounds, quick)
    if only in (None, "video"):
        rows += video_rows(settings, rounds)
    print(fmt(rows))
    info = machine()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n{info['cpu']}, {info['cores']} cores, torch {info['torch']}, onnxruntime {info.get('onnxruntime')}; "
          f"flags {' '.join(info['flags'])}; load {load:.1f}; {time.perf_counter() - started:.0f} s")
    for style_id, record in report.get("auto_styles", {}).items():
        print(f"auto {style_id}: {record['choice']}; measuring {record.get('measure_seconds', '?')} s "
              f"(builds {record.get('build_seconds', '?')} s, 0 when cached)")
    if getattr(args, "json_path", None):
        Path(args.json_path).write_text(json.dumps(
            {"machine": info, **report, "rows": [dataclasses.asdict(r) for r in rows]}, indent=2, default=str))
    if getattr(args, "profile", False) and painter is not None:
        profile(painter, photo, Path(args.json_path).with_suffix("") if getattr(args, "json_path", None) else None)
    return 0


def parser():
    import argparse

    p = argparse.ArgumentParser(prog="python -m anipaint.cli.bench")
    p.add_argument("--json", dest="json_path")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", choices=TABLES)
    return p



