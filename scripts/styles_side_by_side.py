"""Write one side-by-side PNG per style (input | painted) and a contact sheet of all styles.

    .venv/bin/python scripts/styles_side_by_side.py [--out out/styles] [--size 512] [--faces] [--styles a,b]

Pictures are written to a git-ignored folder; they are for looking at, not for committing.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from anipaint import get_painter
from anipaint.models import availability
from anipaint.settings import get_settings


def sample_photos(settings) -> dict[str, Image.Image]:
    photos: dict[str, Image.Image] = {}
    samples = Path(settings.sources).parent / "samples"
    for path in sorted(samples.glob("*.jpg")):
        photos[path.stem] = Image.open(path).convert("RGB")
    try:
        from skimage import data

        photos["astronaut"] = Image.fromarray(data.astronaut())
        photos["coffee"] = Image.fromarray(data.coffee())
    except ImportError:
        pass
    return photos


def labelled(img: Image.Image, text: str) -> Image.Image:
    out = img.copy()
    draw = ImageDraw.Draw(out)
    draw.rectangle((0, 0, 8 + 7 * len(text), 18), fill=(255, 240, 245))
    draw.text((4, 3), text, fill=(120, 40, 70))
    return out


def row(images: list[Image.Image]) -> Image.Image:
    h = max(i.height for i in images)
    sheet = Image.new("RGB", (sum(i.width for i in images), h), (255, 250, 240))
    x = 0
    for i in images:
        sheet.paste(i, (x, 0))
        x += i.width
    return sheet


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="out/styles")
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--faces", action="store_true", help="also restyle faces separately")
    parser.add_argument("--styles", default="", help="comma-separated style ids (default: every available style)")
    args = parser.parse_args()
    settings = get_settings()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    photos = sample_photos(settings)
    inputs = {name: labelled(p.copy().resize(_fit(p, args.size)), f"{name}: input") for name, p in photos.items()}
    sheet_rows = [row(list(inputs.values()))]
    wanted = {s.strip() for s in args.styles.split(",") if s.strip()}
    for status in availability.style_status(settings):
        if wanted and status.style.id not in wanted:
            continue
        if not status.available:
            print(f"{status.style.id:<22} unavailable: {status.reason}")
            continue
        painter = get_painter(status.style.id, settings).warm()
        painted, seconds = [], []
        for name, photo in photos.items():
            start = time.perf_counter()
            result = painter.paint(photo, max_side=args.size, faces=args.faces)
            seconds.append(time.perf_counter() - start)
            painted.append(labelled(result, f"{name}: {status.style.id}"))
        pair = row([v for pair in zip(inputs.values(), painted, strict=True) for v in pair])
        pair.save(out / f"{status.style.id}.png")
        sheet_rows.append(row(painted))
        print(f"{status.style.id:<22} {np.median(seconds):.2f} s/picture → {out / (status.style.id + '.png')}")
    width = max(r.width for r in sheet_rows)
    sheet = Image.new("RGB", (width, sum(r.height for r in sheet_rows)), (255, 250, 240))
    y = 0
    for r in sheet_rows:
        sheet.paste(r, (0, y))
        y += r.height
    sheet.save(out / "all_styles.png")
    print(f"contact sheet → {out / 'all_styles.png'}")


def _fit(img: Image.Image, side: int) -> tuple[int, int]:
    scale = min(1.0, side / max(img.size))
    return max(1, round(img.width * scale)), max(1, round(img.height * scale))


if __name__ == "__main__":
    main()
