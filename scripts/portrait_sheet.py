"""Portrait mode side by side: photo | plain style | portrait | portrait + background style, one row per photo.

    .venv/bin/python scripts/portrait_sheet.py [--out out/portrait_sheet.png] [--style v3-hayao]
                                               [--background v3-shinkai] [--size 512]

The rows are the group sample and scikit-image's astronaut. The sheet is written to a git-ignored folder; it is
for looking at, not for committing.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from PIL import Image
from styles_side_by_side import labelled  # the same label style as the styles sheet

from anipaint import get_painter
from anipaint.settings import get_settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="out/portrait_sheet.png")
    parser.add_argument("--style", default="v3-hayao")
    parser.add_argument("--background", default="v3-shinkai")
    parser.add_argument("--size", type=int, default=512)
    args = parser.parse_args()
    settings = get_settings()
    photos = {"group": Image.open(Path(settings.sources).parent / "samples" / "group_pakutaso.jpg").convert("RGB")}
    from skimage import data

    photos["astronaut"] = Image.fromarray(data.astronaut())
    painter = get_painter(args.style, settings)
    rows = []
    for name, photo in photos.items():
        small = photo.copy()
        small.thumbnail((args.size, args.size), Image.Resampling.LANCZOS)
        cells = [labelled(small, name)]
        for label, options in (
            (f"{args.style}", {"faces": False}),
            ("portrait", {"portrait": True}),
            (f"portrait + {args.background} background", {"portrait": True, "background": args.background}),
        ):
            t0 = time.perf_counter()
            result = painter.paint_result(photo, max_side=args.size, **options)
            print(f"{name:10s} {label:40s} {time.perf_counter() - t0:6.2f} s  faces found: {result.faces_found}")
            cells.append(labelled(result.image.convert("RGB"), label))
        rows.append(np.hstack([np.asarray(c) for c in cells]))
    width = max(r.shape[1] for r in rows)
    sheet = np.vstack([np.pad(r, ((0, 0), (0, width - r.shape[1]), (0, 0)), constant_values=255) for r in rows])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(sheet).save(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
