"""Where portrait mode's time goes: one group photo, stage by stage, as shares of the plain paint.

``python benchmarks/portrait_profile.py [--photo PATH] [--side 512] [--rounds 3]``

Each round paints the plain picture and the portrait picture, then times portrait mode's stages on their own in
the same order the painter runs them: refined face detection on the source, the aligned crops, the person
segmenter on each crop, the face model on each crop, and the blending. Figures are medians over rounds, each ÷
the plain paint of its round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path


def _seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    from anipaint import imaging, preprocess
    from anipaint.faces import get_face_detector
    from anipaint.faces import portrait as pm
    from anipaint.faces.align import align_face
    from anipaint.faces.segmentation import load_segmenter
    from anipaint.models import helpers
    from anipaint.painter import get_painter
    from anipaint.settings import get_settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--photo", default=None, help="default: the group sample")
    parser.add_argument("--style", default="v3-hayao")
    parser.add_argument("--side", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    settings = get_settings()
    photo = Path(args.photo or settings.samples_dir / "group_pakutaso.jpg").read_bytes()
    painter = get_painter(args.style, settings).warm()
    face_painter = get_painter(settings.portrait_face_style, settings).warm()
    detector = get_face_detector(settings, helpers.install_face_detector(settings))
    segment = load_segmenter(settings)
    work = preprocess.to_work_image(imaging.load_image(photo), args.side)
    painted = painter.paint_array(work.rgb)
    faces = detector.detect(work.source)
    placements = pm._placements(faces, work.source.shape, painted.shape, settings.face_size)
    crops = [align_face(work.source, p.face, p.side)[0] for p in placements]
    rect = pm.paint_window(settings.face_size, face_painter.style.paint_shape)
    paint = pm._windowed(face_painter.paint_batch, rect)  # the face model on its window of each crop
    styled = [paint(c[None])[0] for c in crops]

    def plain():
        detector.clear_cache()
        painter.paint(photo, max_side=args.side, faces=False)

    def portrait():
        detector.clear_cache()
        painter.paint(photo, max_side=args.side, faces=False, portrait=True)

    def detect():
        detector.clear_cache()
        detector.detect(work.source)

    def align():
        for p in placements:
            align_face(work.source, p.face, p.side)

    def seg():
        for p, c in zip(placements, crops, strict=True):
            pm._weight(p, c, segment, rect)

    def face_model():
        for c in crops:
            paint(c[None])

    weights = [pm._weight(p, c, segment, rect) for p, c in zip(placements, crops, strict=True)]

    def paste():
        out = painted.copy()
        for p, s, w in zip(placements, styled, weights, strict=True):
            pm._paste(out, p, s, w)

    stages = {"plain": plain, "portrait": portrait, "detect": detect, "align": align, "segmenter": seg,
              "face model": face_model, "paste": paste}
    for fn in stages.values():
        fn()
    got: dict[str, list[float]] = {name: [] for name in stages}
    for _ in range(args.rounds):
        for name, fn in stages.items():
            got[name].append(_seconds(fn))
    print(f"{args.style} at {args.side} px, {len(placements)} faces at {settings.face_size} (painted {rect}), "
          f"{args.rounds} rounds; "
          f"plain on {painter.engine.backend_name}, face model on {face_painter.engine.backend_name}")
    for name, times in got.items():
        shares = [t / p for t, p in zip(times, got["plain"], strict=True)]
        print(f"  {name:24s} {statistics.median(times):7.3f} s   × plain {statistics.median(shares):5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
