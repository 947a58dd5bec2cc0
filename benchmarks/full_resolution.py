"""Exact full resolution per style: streamed against one whole-picture pass, and 4096² in bounded memory.

``python benchmarks/full_resolution.py [--styles v3-hayao,v3-shinkai,v2-hayao,v1-hayao] [--size 1280]
[--large 4096] [--rounds 2] [--threads N] [--json out.json]``

For each style that streams (:func:`anipaint.engine.streaming.for_network`):

* at ``--size`` (a square photo both can hold in memory): the strip executor and one whole-picture pass of the
  eager network, timed in turns in this process (``ratio`` = streamed / whole), and their PSNR;
* at ``--large`` (0 to skip): the strip executor alone in a child process, for its own time and peak RSS, and
  ``s/MP`` against the ``--size`` run to show the time is linear in pixels.

Quote ratios, not seconds, on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from anipaint import store
from anipaint.bench.measure import peak_rss_mb
from anipaint.engine import from_tensor, load_network, to_tensor
from anipaint.engine.streaming import for_network
from anipaint.quality import psnr
from anipaint.registry import get_style
from anipaint.settings import get_settings


def picture(side: int) -> np.ndarray:
    sample = get_settings().samples_dir / "group_pakutaso.jpg"
    return np.asarray(Image.open(sample).convert("RGB").resize((side, side), Image.LANCZOS))


def compare(style_id: str, side: int, rounds: int) -> dict:
    style = get_style(style_id)
    network = load_network(style, store.artefact_path(style))
    streamed = for_network(network, get_settings().scratch_dir)
    if streamed is None:
        return {"style": style_id, "streams": False}
    rgb = picture(side)
    streamed.paint(rgb[:64, :64])
    times: dict[str, list[float]] = {"streamed": [], "whole": []}
    for _ in range(rounds):
        start = time.perf_counter()
        got = streamed.paint(rgb)
        times["streamed"].append(time.perf_counter() - start)
        start = time.perf_counter()
        with torch.inference_mode():
            whole = from_tensor(network(to_tensor(rgb)))
        times["whole"].append(time.perf_counter() - start)
    best = {k: min(v) for k, v in times.items()}
    return {"style": style_id, "streams": True, "side": side, "psnr_db": round(psnr(got, whole), 2),
            "streamed_s": round(best["streamed"], 2), "whole_s": round(best["whole"], 2),
            "ratio": round(best["streamed"] / best["whole"], 2),
            "streamed_s_per_mp": round(best["streamed"] / (side * side / 1e6), 2)}


def large(style_id: str, side: int, threads: int) -> dict:
    """The strip executor at ``side``² in a child process: seconds, peak RSS (MB)."""
    done = subprocess.run([sys.executable, __file__, "--child", style_id, str(side), "--threads", str(threads)],
                          capture_output=True, text=True, timeout=7200)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def child(style_id: str, side: int) -> None:
    style = get_style(style_id)
    streamed = for_network(load_network(style, store.artefact_path(style)), get_settings().scratch_dir)
    rgb = picture(side)
    start = time.perf_counter()
    out = streamed.paint(rgb)
    seconds = time.perf_counter() - start
    rss = peak_rss_mb()
    print(json.dumps({"large_side": side, "large_s": round(seconds, 1), "large_s_per_mp": round(seconds / (side * side
          / 1e6), 2), "large_peak_rss_mb": round(rss), "std": round(float(out.std()), 1)}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--styles", default="v3-hayao,v3-shinkai,v2-hayao,v1-hayao")
    parser.add_argument("--size", type=int, default=1280)
    parser.add_argument("--large", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", nargs=2, metavar=("STYLE", "SIDE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    rows = []
    for style_id in args.styles.split(","):
        row = compare(style_id, args.size, args.rounds) if args.size else {"style": style_id}
        if args.large and row.get("streams", True):
            row.update(large(style_id, args.large, args.threads))
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
