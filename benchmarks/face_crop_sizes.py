"""How big a face's crop needs to be: the group photo at 512 px with the face pass painting crops at several
multiples of the size each face is shown at, side by side and zoomed on the faces.

    .venv/bin/python scripts/face_crop_sizes.py [--out out/face_crop_sizes.png] [--style v3-hayao] [--zoom 2]

Rows: faces off, then ``blend.OVERSAMPLE`` = 1.0, 1.25 (the default), 1.5 and unlimited (each face at its own
source size, at most 512 px). Each row prints the crop sides and the seconds the paint took.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from anipaint import get_painter  # noqa: E402
from anipaint.faces import blend, get_face_detector  # noqa: E402
from anipaint.models import helpers  # noqa: E402
from anipaint.settings import get_settings  # noqa: E402

FACTORS = (1.0, 1.25, 1.5, float("inf"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "face_crop_sizes.png")
    parser.add_argument("--style", default="v3-hayao")
    parser.add_argument("--zoom", type=int, default=2)
    args = parser.parse_args(argv)
    settings = get_settings()
    photo = Image.open(settings.samples_dir / "group_pakutaso.jpg").convert("RGB")
    source = np.asarray(photo)
    painter = get_painter(args.style).warm()
    faces = get_face_detector(settings, helpers.install_face_detector(settings)).detect(source)
    rows = [("faces off", np.asarray(painter.paint(photo, max_side=512, faces=False)))]
    default = blend.OVERSAMPLE
    try:
        for factor in FACTORS:
            blend.OVERSAMPLE = factor
            sides = [p.side for p in blend.place_faces(faces, source.shape, rows[0][1].shape, 512)]
            t0 = time.perf_counter()
            painted = np.asarray(painter.paint(photo, max_side=512, faces=True))
            label = f"crops at {factor:g}x the shown size: sides {sides}"
            print(f"{label}; {time.perf_counter() - t0:.2f} s")
            rows.append((label, painted))
    finally:
        blend.OVERSAMPLE = default
    h, w = rows[0][1].shape[:2]
    boxes = np.array([f.box for f in faces]) * (w / source.shape[1])
    x0, y0 = np.maximum(0, boxes[:, :2].min(0) - 0.6 * boxes[:, 2:].max(0)).astype(int)
    x1, y1 = np.minimum((w, h), (boxes[:, :2] + boxes[:, 2:]).max(0) + 0.6 * boxes[:, 2:].max(0)).astype(int)
    zw, zh = (x1 - x0) * args.zoom, (y1 - y0) * args.zoom
    sheet = Image.new("RGB", (zw, (zh + 18) * len(rows)), "white")
    draw = ImageDraw.Draw(sheet)
    for i, (label, picture) in enumerate(rows):
        crop = Image.fromarray(picture[y0:y1, x0:x1]).resize((zw, zh), Image.Resampling.NEAREST)
        sheet.paste(crop, (0, i * (zh + 18) + 18))
        draw.text((4, i * (zh + 18) + 3), label, fill="black")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
