"""How much the faces of a clip painted with the face pass change from frame to frame, with the pass's one-run
detection (:func:`anipaint.faces.blend.faces_as_painted`) and with the detector's refined full-resolution
landmarks, steadying on and off, against faces off.

The clip is the group photo panned and zoomed by a known motion (no clip in ../shared/samples shows faces), so
each painted frame can be warped back onto the first exactly; the figure is the mean absolute change between
consecutive warped-back frames inside the faces (0-255 levels). Frames are painted and steadied as
``anipaint.media.frames`` does for a video, without the encoder.

    .venv/bin/python benchmarks/face_pass_steadiness.py [--style v3-hayao] [--frames 24] [--side 512]
"""

from __future__ import annotations

import argparse

import cv2
import numpy as np
from PIL import Image

from anipaint import postprocess, preprocess
from anipaint.faces import blend, face_mask, get_face_detector
from anipaint.media.temporal import MotionEstimator, Steadier
from anipaint.models import helpers
from anipaint.painter import get_painter
from anipaint.settings import get_settings

FRAME_SIDE = 860  # frames cut from the 900 px photo, so the pan never shows an edge


def motion(t: int) -> np.ndarray:
    """Frame t's 3x3 transform from the photo: a slow pan right and down and a slight zoom."""
    zoom = 1 + 0.004 * t
    return np.array([[zoom, 0, 1.3 * t - 20], [0, zoom, 0.7 * t - 20], [0, 0, 1]], np.float64)


def change_in_faces(frames: list[np.ndarray], mask: np.ndarray, painted_scale: float) -> float:
    """Mean |frame t+1 - frame t| inside ``mask`` after warping every frame back onto the first."""
    scale = np.diag([painted_scale, painted_scale, 1.0])
    back = []
    for t, frame in enumerate(frames):
        first_to_t = scale @ motion(t) @ np.linalg.inv(motion(0)) @ np.linalg.inv(scale)
        back.append(cv2.warpAffine(frame, first_to_t[:2], frame.shape[1::-1],
                                   flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP).astype(np.float32))
    return float(np.abs(np.diff(np.stack(back), axis=0))[:, mask].mean())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--style", default="v3-hayao")
    parser.add_argument("--frames", type=int, default=24)
    parser.add_argument("--side", type=int, default=512)
    args = parser.parse_args(argv)
    settings = get_settings()
    photo = np.asarray(Image.open(settings.samples_dir / "group_pakutaso.jpg").convert("RGB"))
    painter = get_painter(args.style, settings).warm()
    detector = get_face_detector(settings, helpers.install_face_detector(settings))
    detect = {
        "faces off": None,
        "one run (as painted)": lambda work: blend.faces_as_painted(detector, work.source.shape, work.rgb),
        "refined landmarks": lambda work: detector.detect(work.source),
    }
    painted: dict[str, list[np.ndarray]] = {name: [] for name in detect}
    works = []
    for t in range(args.frames):
        frame = cv2.warpAffine(photo, motion(t)[:2], (FRAME_SIDE, FRAME_SIDE), flags=cv2.INTER_LINEAR,
                               borderMode=cv2.BORDER_REFLECT_101)
        work = preprocess.to_work_image(Image.fromarray(frame), args.side)
        works.append(work)
        plain = painter.paint_array(work.rgb)
        for name, find in detect.items():
            out = plain if find is None else blend.enhance_faces(work.source, plain, find(work), painter.paint_batch)
            painted[name].append(np.asarray(postprocess.finish(out, None, work.rgb, 1.0)))
    first = works[0]
    mask = np.max([face_mask(f, first.source.shape, first.rgb.shape) for f in detector.detect(first.source)],
                  axis=0) > 0.5
    mask = cv2.erode(mask.astype(np.uint8), np.ones((15, 15), np.uint8)).astype(bool)
    scale = first.rgb.shape[1] / FRAME_SIDE
    print(f"{args.style}, {args.frames} frames at {first.rgb.shape[1]} px: the faces' change from frame to frame "
          "(levels, motion undone)")
    for name, frames in painted.items():
        estimator, steadier = MotionEstimator(), Steadier()
        steady = [steadier.next(f, estimator.next(w.rgb)) for f, w in zip(frames, works, strict=True)]
        print(f"  {name:22s} steadying off {change_in_faces(frames, mask, scale):5.2f}   "
              f"on {change_in_faces(steady, mask, scale):5.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
