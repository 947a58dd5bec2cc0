"""Animated pictures (GIF, WebP, APNG): every frame painted, steady along the motion, written back in the same
format with the same frame timings and loop count.

Pillow decodes each frame composited onto the ones before it, as a viewer shows it, so the painter sees whole
pictures. A GIF holds 256 colours: all frames share one palette made from a few of them (a palette per frame would
make flat colours jump again), and they are mapped onto it without dithering, whose pattern would shimmer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
from PIL import Image, ImageSequence

from anipaint import imaging
from anipaint.errors import ImageError
from anipaint.media.frames import frame_options, paint_frames
from anipaint.options import PaintOptions

# Pillow's format → (suffix, media type); PNG: APNG
ANIMATED_FORMATS = {"GIF": (".gif", "image/gif"), "WEBP": (".webp", "image/webp"), "PNG": (".png", "image/png")}
PALETTE_SAMPLES = 8  # frames the shared GIF palette is made from


def is_animated(src: Path | bytes | BinaryIO) -> bool:
    """Whether ``src`` (a file, an upload's bytes or a seekable file object) is a picture with more than one frame
    (False for anything Pillow cannot open)."""
    return frame_count(src) > 1


def frame_count(src: Path | bytes | BinaryIO) -> int:
    """How many frames an animated picture has (1 for a still GIF, WebP or PNG, 0 for anything else)."""
    import io

    if not isinstance(src, bytes | str | Path):
        src.seek(0)
    try:
        # Only the openers of formats that animate: the others answer 1 anyway, and some (FTEX) close the file.
        with Image.open(io.BytesIO(src) if isinstance(src, bytes) else src, formats=tuple(ANIMATED_FORMATS)) as img:
            return getattr(img, "n_frames", 1)
    except (OSError, ValueError, RuntimeError, Image.DecompressionBombError):  # RuntimeError: Pillow's AVIF reader
        return 0


def paint_animation(
    painter,
    src: Path,
    dst: Path,
    options: PaintOptions | None = None,
    *,
    on_frame: Callable[[int, int], None] | None = None,
) -> dict:
    """Paint every frame of the animated picture ``src`` into ``dst`` (its format from ``dst``'s suffix, else the
    source's). Returns {"frames", "width", "height", "temporal", "durations", "loop"}."""
    options = frame_options(options, painter)
    try:
        source = Image.open(src, formats=tuple(ANIMATED_FORMATS))
    except (OSError, ValueError) as exc:
        raise ImageError(f"{src}: not a picture we can read ({exc})") from None
    with source:
        total = getattr(source, "n_frames", 1)
        imaging.check_limits(source.width, source.height * total, painter.settings.max_pixels)
        durations: list[int] = []
        loop = source.info.get("loop", 0)

        def frames() -> Iterator[Image.Image]:
            for frame in ImageSequence.Iterator(source):
                frame.load()  # WebP reads a frame's duration when it decodes it
                durations.append(int(frame.info.get("duration", source.info.get("duration", 100)) or 100))
                yield frame.convert("RGBA") if _has_alpha(frame) else frame.convert("RGB")

        try:
            painted = list(paint_frames(painter, frames(), options,
                                        on_frame=lambda n: on_frame(n, total) if on_frame else None))
        except (OSError, EOFError) as exc:
            raise ImageError(f"{src}: the animation could not be decoded ({exc})") from None
        fmt = {v[0]: k for k, v in ANIMATED_FORMATS.items()}.get(dst.suffix.lower(), source.format)
    if not painted:
        raise ImageError(f"{src}: the animation has no frames")
    dst.parent.mkdir(parents=True, exist_ok=True)
    save_animation(painted, durations, loop, dst, fmt)
    h, w = painted[0].shape[:2]
    return {"frames": len(painted), "width": w, "height": h, "temporal": options.temporal,
            "durations": durations, "loop": loop}


def save_animation(frames: list[np.ndarray], durations: list[int], loop: int, dst: Path, fmt: str) -> None:
    """Write ``frames`` (uint8 RGB or RGBA) as an animated ``fmt`` ("GIF", "WEBP", "PNG") with per-frame durations
    in milliseconds and a loop count (0: forever)."""
    if fmt == "GIF":
        pictures = _on_one_palette(frames)
    else:
        pictures = [Image.fromarray(f) for f in frames]
    extra = {"lossless": False, "quality": 90} if fmt == "WEBP" else {}
    if fmt == "GIF":
        extra = {"optimize": False, "disposal": 1}
    pictures[0].save(dst, format=fmt, save_all=True, append_images=pictures[1:], duration=durations[: len(pictures)],
                     loop=loop, **extra)


def _has_alpha(frame: Image.Image) -> bool:
    return frame.mode in ("RGBA", "LA", "PA") or "transparency" in frame.info


def _on_one_palette(frames: list[np.ndarray]) -> list[Image.Image]:
    """The frames mapped without dithering onto one palette made from a few of them; fully transparent pixels (alpha
    below half) onto a transparent entry."""
    alpha = frames[0].shape[-1] == 4
    step = max(1, len(frames) // PALETTE_SAMPLES)
    samples = [f[..., :3] for f in frames[::step][:PALETTE_SAMPLES]]
    colours = 255 if alpha else 256
    palette = Image.fromarray(np.concatenate(samples, axis=0)).quantize(colours, method=Image.Quantize.MEDIANCUT)
    out = []
    for f in frames:
        picture = Image.fromarray(np.ascontiguousarray(f[..., :3])).quantize(palette=palette,
                                                                            dither=Image.Dither.NONE)
        if alpha:
            indices = np.asarray(picture).copy()
            indices[f[..., 3] < 128] = 255
            picture = Image.fromarray(indices, "P")
            picture.putpalette(palette.getpalette())
            picture.info["transparency"] = 255
        out.append(picture)
    return out
