"""Which colour space makes style strength look even: sRGB values, linear light or CIE L*a*b*.

``python benchmarks/strength_spaces.py [--styles v3-cute,v2-hayao] [--sheet out.png]``

For each style and photo, the painted picture is mixed with the photo at strengths 0, 0.1, …, 1 in each space,
and the perceived distance from the photo is measured as the mean CIEDE2000 colour difference (scikit-image).
An even slider moves that distance in equal steps: printed are the largest departure of d(s)/d(1) from s, and
the spread (coefficient of variation) of the ten step sizes; smaller is more even — over all pixels and over
the pixels whose lightness the style changes by more than 20 L*. ``--sheet`` writes a picture
with one row per space at strengths 0, 0.25, 0.5, 0.75 and 1, to look at.
"""

from __future__ import annotations

import argparse

import numpy as np
from PIL import Image
from skimage import color, data

from anipaint import get_painter, postprocess

STEPS = np.linspace(0.0, 1.0, 11)


def _to_linear(rgb: np.ndarray) -> np.ndarray:
    c = rgb / 255.0
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _from_linear(linear: np.ndarray) -> np.ndarray:
    c = np.where(linear <= 0.0031308, 12.92 * linear, 1.055 * np.clip(linear, 0, 1) ** (1 / 2.4) - 0.055)
    return np.clip(np.rint(c * 255.0), 0, 255).astype(np.uint8)


def mix(space: str, photo: np.ndarray, painted: np.ndarray, s: float) -> np.ndarray:
    a, b = photo.astype(np.float64), painted.astype(np.float64)
    if space == "srgb":
        return np.clip(np.rint(a + s * (b - a)), 0, 255).astype(np.uint8)
    if space == "linear":
        la, lb = _to_linear(a), _to_linear(b)
        return _from_linear(la + s * (lb - la))
    return postprocess.blend(photo, painted, s)  # "lab": the library's own blend


def evenness(photo: np.ndarray, painted: np.ndarray, space: str, strong: bool) -> tuple[float, float, float]:
    """(max |d(s)/d(1) - s|, step CV, L* of the half-way mix minus the mean of the ends).

    ``strong``: only the pixels whose lightness the style changes by more than 20 L* (drawn lines, flattened
    shadows), where the spaces differ most."""
    mixes = [mix(space, photo, painted, s) for s in STEPS]
    labs = [color.rgb2lab(m) for m in mixes]
    keep = np.abs(labs[-1][..., 0] - labs[0][..., 0]) > 20 if strong else np.ones(photo.shape[:2], bool)
    labs = [lab[keep] for lab in labs]
    dist = np.array([color.deltaE_ciede2000(labs[0], lab).mean() for lab in labs])
    steps = np.array([color.deltaE_ciede2000(labs[i], labs[i + 1]).mean() for i in range(len(labs) - 1)])
    departure = float(np.max(np.abs(dist / dist[-1] - STEPS)))
    mid_lightness = float(labs[5][..., 0].mean() - (labs[0][..., 0].mean() + labs[-1][..., 0].mean()) / 2)
    return departure, float(steps.std() / steps.mean()), mid_lightness


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--styles", default="v3-cute,v2-hayao")
    parser.add_argument("--sheet", default=None)
    args = parser.parse_args()
    photos = {"astronaut": data.astronaut(), "coffee": data.coffee(), "chelsea": data.chelsea()}
    rows = []
    print(f"{'style':<10} {'photo':<10} {'pixels':<7} {'space':<7} {'max |d/d1 - s|':>15} {'step CV':>8} "
          f"{'mid L* shift':>12}")
    for style in args.styles.split(","):
        painter = get_painter(style)
        for name, img in photos.items():
            photo = np.asarray(Image.fromarray(img).convert("RGB"))
            painted = painter.paint_array(photo)
            for strong in (False, True):
                for space in ("srgb", "linear", "lab"):
                    dep, cv, mid = evenness(photo, painted, space, strong)
                    pixels = "ΔL>20" if strong else "all"
                    print(f"{style:<10} {name:<10} {pixels:<7} {space:<7} {dep:>15.3f} {cv:>8.3f} {mid:>12.2f}")
                if name == "astronaut" and style == args.styles.split(",")[0]:
                    rows.append(np.hstack([mix(space, photo, painted, s)[::2, ::2] for s in (0, 0.25, 0.5, 0.75, 1)]))
    if args.sheet and rows:
        Image.fromarray(np.vstack(rows)).save(args.sheet)
        print(f"sheet (rows: sRGB, linear light, Lab): {args.sheet}")


if __name__ == "__main__":
    main()
