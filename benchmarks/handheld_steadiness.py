"""How steady painted hand-held footage is, and what each candidate remedy does to it.

Hand-held-style clips are made from still photos no test has seen (scikit-image's rocket and coffee, and the
shared group photo): a 512×384 window that shakes a few pixels along a smooth path with a little jitter, sensor
noise, and H.264 at a phone's bitrate per pixel (about 1.7 Mbit/s at this size). Each clip is painted through the
real pipeline (``paint_video``) frame by frame and steady, and steady with each variant:

* ``flow 384`` / ``flow 512``: the optical flow computed on a larger copy than 256 px;
* ``input 0.5`` / ``input 0.8``: the input itself steadied along the flow before it is painted
  (``temporal.INPUT_ALPHA``);
* ``alpha 0.95``: more of the carried-over picture kept where the flow is trusted (``temporal.ALPHA``);
* softer confidence masks: ``sigma 80`` (``temporal.PHOTO_SIGMA``), ``mblur 2`` (a stronger blur before the
  photometric mismatch, ``temporal.MISMATCH_BLUR``), ``soft 5`` (the forward-backward check as a smooth weight,
  ``temporal.CONSISTENCY_SOFTNESS``), ``feather 2`` (the trust map blurred, ``temporal.TRUST_FEATHER``);
* ``tune animation``, ``x264 psy=0``, ``crf 16``: libx264's options for the painted clip
  (``video.ENCODER_OPTIONS``);
* ``cubic 0.8``: the share of the carried picture resampled bicubic, the rest bilinear, at a clip's start
  (``temporal.CUBIC_SHARE``); ``target 0.95``: the sharpness the share is then steered to
  (``temporal.SHARPNESS_TARGET``, 0: a fixed share);
  variants combine, e.g. ``flow 512 alpha 0.95`` or ``soft 5 cubic 0.9``;

and reports Lai et al.'s warping error beside the input's own (the goal: the painting no less steady than its
input), the sharpness ratio against frame by frame, and the time ratio. A strip of 4 frames cropped at 2× on fine
texture goes to artifacts/video/handheld-<clip>.png (input, frame by frame, steady, the last variant).

    .venv/bin/python benchmarks/handheld_steadiness.py [--style v3-hayao] [--frames 36]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from anipaint.media import temporal, video
from anipaint.media.video import paint_video
from anipaint.options import PaintOptions
from anipaint.painter import get_painter
from anipaint.settings import get_settings

REPO = Path(__file__).resolve().parent.parent
SIZE = (512, 384)


def handheld(photo: np.ndarray, path: Path, frames: int, seed: int) -> Path:
    import av

    rng = np.random.default_rng(seed)
    h, w = photo.shape[:2]
    scale = max((SIZE[0] + 24) / w, (SIZE[1] + 24) / h)
    base = cv2.resize(photo, (math.ceil(w * scale), math.ceil(h * scale)), interpolation=cv2.INTER_AREA)
    cy, cx = (base.shape[0] - SIZE[1]) / 2, (base.shape[1] - SIZE[0]) / 2
    phases = rng.uniform(0, 2 * math.pi, 4)
    rate = 24
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=Fraction(rate, 1))
        stream.width, stream.height, stream.pix_fmt = SIZE[0], SIZE[1], "yuv420p"
        stream.bit_rate = int(0.36 * SIZE[0] * SIZE[1] * rate)  # a phone's 10 Mbit/s at 720p30, per pixel
        for t in range(frames):
            dx = 3.0 * math.sin(2 * math.pi * t / 19 + phases[0]) + 1.2 * math.sin(2 * math.pi * t / 7 + phases[1])
            dy = 2.5 * math.sin(2 * math.pi * t / 23 + phases[2]) + 1.0 * math.sin(2 * math.pi * t / 5 + phases[3])
            dx, dy = dx + rng.normal(0, 0.3), dy + rng.normal(0, 0.3)
            m = np.float32([[1, 0, -(cx + dx)], [0, 1, -(cy + dy)]])
            frame = cv2.warpAffine(base, m, SIZE, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
            noisy = np.clip(frame.astype(np.float32) + rng.normal(0, 2.5, frame.shape), 0, 255).astype(np.uint8)
            out.mux(stream.encode(av.VideoFrame.from_ndarray(noisy, format="rgb24")))
        out.mux(stream.encode(None))
    return path


def frames_of(path: Path) -> list[np.ndarray]:
    import av

    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


# A variant's word → the module constant it sets (flow and alpha are the classes' defaults, see paint()).
CONSTANTS = {"input": "INPUT_ALPHA", "sigma": "PHOTO_SIGMA", "mblur": "MISMATCH_BLUR",
             "soft": "CONSISTENCY_SOFTNESS", "feather": "TRUST_FEATHER", "cubic": "CUBIC_SHARE",
             "target": "SHARPNESS_TARGET"}


# A variant's word → the libx264 option it sets on the painted clip (video.ENCODER_OPTIONS).
ENCODER_WORDS = {"tune": "tune", "x264": "x264-params", "crf": "crf"}


def paint(painter, clip: Path, dst: Path, steady: bool, flow_side: int | None = None, alpha: float | None = None,
          **constants: float):
    """Paint ``clip`` into ``dst``; the variant's knobs (``constants``: names from :data:`CONSTANTS`) are set for
    this paint only."""
    flow_defaults = temporal.MotionEstimator.__init__.__defaults__
    alpha_defaults = temporal.Steadier.__init__.__defaults__
    saved = {name: getattr(temporal, name) for name in CONSTANTS.values()}
    encoder = dict(video.ENCODER_OPTIONS)
    for word in [w for w in constants if w in ENCODER_WORDS]:
        video.ENCODER_OPTIONS[ENCODER_WORDS[word]] = str(constants.pop(word))
    if flow_side is not None:
        temporal.MotionEstimator.__init__.__defaults__ = (flow_side,)
    if alpha is not None:
        temporal.Steadier.__init__.__defaults__ = (alpha, None)
    for word, value in constants.items():
        setattr(temporal, CONSTANTS[word], value)
    try:
        start = time.perf_counter()
        paint_video(painter, clip, dst, PaintOptions(temporal=steady, faces=False))
        return time.perf_counter() - start, frames_of(dst)
    finally:
        temporal.MotionEstimator.__init__.__defaults__ = flow_defaults
        temporal.Steadier.__init__.__defaults__ = alpha_defaults
        for name, value in saved.items():
            setattr(temporal, name, value)
        video.ENCODER_OPTIONS.clear()
        video.ENCODER_OPTIONS.update(encoder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--style", default=None)
    parser.add_argument("--frames", type=int, default=36)
    parser.add_argument("--variants", default="flow 384,flow 512,input 0.5,input 0.8")
    args = parser.parse_args()
    from skimage import data

    painter = get_painter(args.style, get_settings()).warm()
    photos = {"rocket": data.rocket(), "coffee": data.coffee(),
              "group": np.asarray(Image.open(get_settings().samples_dir / "group_pakutaso.jpg").convert("RGB"))}
    variants = [v.split() for v in args.variants.split(",") if v]
    out_dir = REPO / "artifacts" / "video"
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"style {painter.style.id} on {painter.engine.backend_name}; warping error ×1000 (lower is steadier)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for seed, (name, photo) in enumerate(photos.items()):
            clip = handheld(photo, work / f"{name}.mp4", args.frames, seed)
            inputs = frames_of(clip)
            paint(painter, clip, work / "warm.mp4", False)  # the first paints of a process are slower
            t_off, off = paint(painter, clip, work / "off.mp4", False)
            t_on, on = paint(painter, clip, work / "on.mp4", True)
            runs = {"frame by frame": (t_off, off), "steady": (t_on, on)}
            for variant in variants:
                kwargs: dict = {}
                for kind, value in zip(variant[::2], variant[1::2], strict=True):
                    knob = {"flow": "flow_side", "alpha": "alpha"}.get(kind, kind)
                    kwargs[knob] = int(value) if kind == "flow" else value if kind in ENCODER_WORDS else float(value)
                label = " ".join(variant)
                runs[f"steady, {label}"] = paint(painter, clip, work / f"{label.replace(' ', '-')}.mp4", True, **kwargs)
            errors = temporal.warping_errors(inputs, [inputs] + [frames for _, frames in runs.values()])
            floor, errors = errors[0], errors[1:]
            sharp_off = temporal.sharpness(off)
            print(f"{name}: input {floor * 1000:.3f}")
            for (label, (seconds, frames)), error in zip(runs.items(), errors, strict=True):
                print(f"  {label:<22} {error * 1000:.3f}  ×{error / errors[0]:.2f} of frame by frame, "
                      f"×{error / floor:.2f} of the input's;  sharpness ×{temporal.sharpness(frames) / sharp_off:.3f}"
                      f";  time ×{seconds / t_off:.2f}")
            y, x = 120, 160  # fine texture, cropped and shown at 2×
            rows = [np.concatenate([cv2.resize(f[y:y + 96, x:x + 128], (256, 192), interpolation=cv2.INTER_NEAREST)
                                    for f in group[12:16]], axis=1)
                    for group in (inputs, off, on, list(runs.values())[-1][1])]
            Image.fromarray(np.concatenate(rows, axis=0)).save(out_dir / f"handheld-{name}.png")


if __name__ == "__main__":
    main()
