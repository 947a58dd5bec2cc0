"""How steady painted video is, temporal consistency on and off, on the shared real clips: Lai et al.'s warping
error (the input clip's own beside it, about the floor), sharpness (mean gradient) and time, plus a strip of
consecutive frames to look at (artifacts/video/<clip>-strip.png: input, frame by frame, steady).

The clips go through the real pipeline (`paint_video` / `paint_animation`, encoded and decoded again), so the
figures include the encoder's and the GIF palette's effect.

    .venv/bin/python benchmarks/video_steadiness.py [--style v3-hayao] [--json artifacts/video_steadiness.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageSequence

from anipaint.media import temporal
from anipaint.media.animation import paint_animation
from anipaint.media.video import paint_video
from anipaint.options import PaintOptions
from anipaint.painter import get_painter
from anipaint.settings import get_settings

REPO = Path(__file__).resolve().parent.parent


def clip_frames(path: Path) -> list[np.ndarray]:
    """Every frame of a video or animated picture as RGB uint8."""
    if path.suffix.lower() in (".gif", ".webp", ".png"):
        with Image.open(path) as img:
            return [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(img)]
    import av

    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def measure(painter, clip: Path, work: Path, temporal_on: bool) -> tuple[dict, list[np.ndarray]]:
    dst = work / f"{clip.stem}-{'steady' if temporal_on else 'frames'}{'.gif' if clip.suffix == '.gif' else '.mp4'}"
    paint = paint_animation if clip.suffix == ".gif" else paint_video
    start = time.perf_counter()
    paint(painter, clip, dst, PaintOptions(temporal=temporal_on, faces=False))
    seconds = time.perf_counter() - start
    outputs = clip_frames(dst)
    return {"seconds": seconds, "sharpness": temporal.sharpness(outputs)}, outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--style", default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    settings = get_settings()
    painter = get_painter(args.style, settings).warm()
    out_dir = REPO / "artifacts" / "video"
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for clip in (settings.samples_dir / "realshort.mp4", settings.samples_dir / "newtonscradle.gif"):
            inputs = clip_frames(clip)
            measure(painter, clip, Path(tmp), False)  # warm-up: the first paints of a process are slower
            off, frames_off = measure(painter, clip, Path(tmp), False)
            on, frames_on = measure(painter, clip, Path(tmp), True)
            h, w = frames_on[0].shape[:2]
            cropped = [f[:h, :w] for f in inputs]
            # the flows are worked out once for the three paintings measured along them
            off["warping_error"], on["warping_error"], floor = temporal.warping_errors(
                cropped, [frames_off, frames_on, cropped])
            row = {"clip": clip.name, "style": painter.style.id, "backend": painter.engine.backend_name,
                   "frames": len(inputs), "input_warping_error": floor, "off": off, "on": on,
                   "warping_ratio": on["warping_error"] / off["warping_error"],
                   "sharpness_ratio": on["sharpness"] / off["sharpness"], "time_ratio": on["seconds"] / off["seconds"]}
            rows.append(row)
            strip = [np.concatenate([f[:h, :w] for f in group[10:14]], axis=1)
                     for group in (inputs, frames_off, frames_on)]
            Image.fromarray(np.concatenate(strip, axis=0)).save(out_dir / f"{clip.stem}-strip.png")
            print(f"{clip.name:<18} input {floor:.5f}  frame by frame {off['warping_error']:.5f}  steady "
                  f"{on['warping_error']:.5f} (×{row['warping_ratio']:.2f})  sharpness ×{row['sharpness_ratio']:.3f}"
                  f"  time ×{row['time_ratio']:.2f} ({off['seconds']:.1f} s → {on['seconds']:.1f} s)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
