"""How steady painted real footage is, in every style that paints clips: one table of the input's own warping
error, frame by frame and steady, their ratios, sharpness and time.

Each clip in the shared samples is cut to a segment (``SEGMENTS``: a start frame and a length; ``bikes_cuts.mp4``'s
holds a hard cut) and scaled to at most ``--side`` pixels on the long side (INTER_AREA). Each segment is painted
through the real frame pipeline (``media.frames.paint_frames``: the reader thread's motion, batching, the blend)
frame by frame and steady, timed in turns in one process (the fastest of ``--rounds`` passes of each), then encoded
and decoded with the writer's libx264 options, so the figures include the encoder's effect. Lai et al.'s warping
error is measured within shots: frame pairs across a hard cut of the input (a jump in the colour histogram,
``CUT_DISTANCE``, a test that knows nothing of the steadier) are left out, and the first steady frame after each
such cut is compared with its frame-by-frame painting (PSNR, dB). A strip of 4 consecutive frames cropped at 2× on
the most textured part of each segment goes to artifacts/video/real-<clip>-<style>.png (input, frame by frame,
steady).

    .venv/bin/python benchmarks/real_steadiness.py [--styles v3-hayao,v3-shinkai,v3-cute,whitebox]
        [--clips realshort.mp4,...] [--frames 48] [--side 480] [--rounds 3] [--json artifacts/real_steadiness.json]
"""

from __future__ import annotations

import argparse
import io
import json
import time
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from anipaint.media import temporal
from anipaint.media.frames import frame_options, paint_frames
from anipaint.media.video import ENCODER_OPTIONS, _decoded
from anipaint.options import PaintOptions
from anipaint.painter import get_painter
from anipaint.quality import psnr
from anipaint.settings import get_settings

REPO = Path(__file__).resolve().parent.parent
STYLES = "v3-hayao,v3-shinkai,v3-cute,whitebox"
# clip → first frame of the segment (segments avoid the clips' first frames, where phones settle exposure)
SEGMENTS = {"realshort.mp4": 0, "dog_foliage.mp4": 120, "pancake_phone.mkv": 100, "pillow_phone.mp4": 40,
            "bikes_cuts.mp4": 110}
# Bhattacharyya distance between consecutive inputs' hue-saturation histograms above which a frame pair is a hard
# cut: 0.44 at bikes_cuts.mp4's cut, at most 0.12 in every other pair of the segments, whip pans of the phone clips
# included (a mean grey change cannot tell those from a cut: 52 at both).
CUT_DISTANCE = 0.3


def segment(clip: Path, start: int, frames: int, side: int) -> list[np.ndarray]:
    out = []
    for i, image in enumerate(_decoded(clip)):  # upright, as paint_video decodes
        if i >= start + frames:
            break
        if i >= start:
            rgb = np.asarray(image.convert("RGB"))
            h, w = rgb.shape[:2]
            scale = min(1.0, side / max(h, w))
            if scale < 1.0:
                size = (round(w * scale) // 2 * 2, round(h * scale) // 2 * 2)
                rgb = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)
            out.append(rgb)
    return out


def encoded(frames: list[np.ndarray], fps: int = 25) -> list[np.ndarray]:
    """``frames`` through the writer's libx264 options and back."""
    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.height, stream.width = frames[0].shape[0] // 2 * 2, frames[0].shape[1] // 2 * 2
        stream.pix_fmt, stream.options = "yuv420p", dict(ENCODER_OPTIONS)
        for f in frames:
            out.mux(stream.encode(av.VideoFrame.from_ndarray(
                np.ascontiguousarray(f[: stream.height, : stream.width, :3]), format="rgb24")))
        out.mux(stream.encode(None))
    buf.seek(0)
    with av.open(buf) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def painted(painter, inputs: list[np.ndarray], steady: bool) -> tuple[float, list[np.ndarray]]:
    options = frame_options(PaintOptions(temporal=steady, faces=False), painter)
    start = time.perf_counter()
    frames = list(paint_frames(painter, (Image.fromarray(f) for f in inputs), options))
    return time.perf_counter() - start, frames


def cuts(inputs: list[np.ndarray]) -> list[int]:
    """Frames that start a new shot (a hard cut of the input)."""
    hists = [cv2.normalize(cv2.calcHist([cv2.cvtColor(f, cv2.COLOR_RGB2HSV)], [0, 1], None, [16, 8],
                                        [0, 180, 0, 256]), None).flatten() for f in inputs]
    return [t for t in range(1, len(hists))
            if cv2.compareHist(hists[t], hists[t - 1], cv2.HISTCMP_BHATTACHARYYA) > CUT_DISTANCE]


def within_shots(inputs: list[np.ndarray], paintings: list[list[np.ndarray]], starts: list[int]) -> list[float]:
    """:func:`temporal.warping_errors` over each shot, weighted by its frame pairs."""
    bounds = [0, *starts, len(inputs)]
    total, pairs = np.zeros(len(paintings)), 0
    for a, b in zip(bounds, bounds[1:], strict=False):
        if b - a < 2:
            continue
        total += (b - a - 1) * np.array(temporal.warping_errors(inputs[a:b], [p[a:b] for p in paintings]))
        pairs += b - a - 1
    return list(total / pairs)


def strip(inputs, off, on, path: Path) -> None:
    """4 consecutive frames cropped at 2× where the input is most textured (largest mean gradient)."""
    h, w = inputs[0].shape[:2]
    ch, cw = min(96, h), min(128, w)
    t = len(inputs) // 2
    grey = cv2.cvtColor(inputs[t], cv2.COLOR_RGB2GRAY).astype(np.float32)
    grad = cv2.magnitude(cv2.Sobel(grey, cv2.CV_32F, 1, 0), cv2.Sobel(grey, cv2.CV_32F, 0, 1))
    window = cv2.blur(grad, (cw, ch))[ch // 2 : h - ch // 2 + 1, cw // 2 : w - cw // 2 + 1]
    y, x = np.unravel_index(int(np.argmax(window)), window.shape)
    rows = [np.concatenate([cv2.resize(f[y : y + ch, x : x + cw, :3], (2 * cw, 2 * ch),
                                       interpolation=cv2.INTER_NEAREST) for f in group[t : t + 4]], axis=1)
            for group in (inputs, off, on)]
    Image.fromarray(np.concatenate(rows, axis=0)).save(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--styles", default=STYLES)
    parser.add_argument("--clips", default=",".join(SEGMENTS))
    parser.add_argument("--frames", type=int, default=48)
    parser.add_argument("--side", type=int, default=480)
    parser.add_argument("--rounds", type=int, default=3, help="timed passes of each, in turns (the fastest counts)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    samples = get_settings().samples_dir
    out_dir = REPO / "artifacts" / "video"
    out_dir.mkdir(parents=True, exist_ok=True)
    clips = {name: segment(samples / name, SEGMENTS[name], args.frames, args.side) for name in args.clips.split(",")}
    rows = []
    print("warping error ×1000 within shots (lower is steadier); ratios against the input's own (×in), frame by "
          "frame (×fbf); sharpness and time against frame by frame")
    print(f"{'clip':<18} {'style':<10} {'frames':>6} {'input':>6} {'fbf':>6} {'steady':>6} {'fbf×in':>6} "
          f"{'st×in':>6} {'st×fbf':>6} {'sharp':>6} {'time':>5}  cut dB")
    for style in args.styles.split(","):
        painter = get_painter(style).warm()
        for name, inputs in clips.items():
            painted(painter, inputs[:4], False)  # the first paints of a process are slower
            t_off, t_on = float("inf"), float("inf")
            for _ in range(args.rounds):  # in turns, the fastest of each: one pass alone varied by ±20 %
                seconds, off = painted(painter, inputs, False)
                t_off = min(t_off, seconds)
                seconds, on = painted(painter, inputs, True)
                t_on = min(t_on, seconds)
            cut_db = [psnr(on[t], off[t]) for t in cuts(inputs)]  # before the encoder
            off, on = encoded(off), encoded(on)
            h, w = on[0].shape[:2]
            inputs_c = [f[:h, :w] for f in inputs]
            floor, e_off, e_on = within_shots(inputs_c, [inputs_c, off, on], cuts(inputs_c))
            row = {"clip": name, "style": style, "backend": painter.engine.backend_name, "frames": len(inputs),
                   "size": [w, h], "input": floor, "frame_by_frame": e_off, "steady": e_on,
                   "sharpness_ratio": temporal.sharpness(on) / temporal.sharpness(off),
                   "time_ratio": t_on / t_off, "cut_psnr": cut_db}
            rows.append(row)
            print(f"{name:<18} {style:<10} {len(inputs):>6} {floor * 1e3:6.3f} {e_off * 1e3:6.3f} {e_on * 1e3:6.3f} "
                  f"{e_off / floor:6.2f} {e_on / floor:6.2f} {e_on / e_off:6.2f} {row['sharpness_ratio']:6.3f} "
                  f"{row['time_ratio']:5.2f}  {' '.join(f'{d:.1f}' for d in cut_db)}", flush=True)
            strip(inputs_c, off, on, out_dir / f"real-{Path(name).stem}-{style}.png")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
