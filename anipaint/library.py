"""The one-call library: :func:`paint` a picture, :func:`paint_video` a clip, list the :func:`styles`.

Each call finds the style's shared painter (one per style per process), so the first call loads the model (and,
unless offline, downloads the style's files first) and later calls reuse it. What comes back has the type that came
in: a path or a PIL image gives a PIL image, bytes or a file give encoded bytes, an array gives an array.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, fields
from os import PathLike
from pathlib import Path
from typing import Any, BinaryIO, Literal, overload

import numpy as np
from PIL import Image

from anipaint import imaging
from anipaint.errors import ImageError, OptionError
from anipaint.models import availability, sources
from anipaint.models.registry import aliases_of, all_styles
from anipaint.options import PaintOptions
from anipaint.settings import Settings, get_settings

Progress = Callable[[str, float], None]  # (stage, fraction done)
FrameProgress = Callable[[int, int], None]  # (frames done, frames in all; 0 when the file does not say)
_OPTION_NAMES = tuple(f.name for f in fields(PaintOptions) if f.name != "style")
_ENCODINGS = ("PNG", "JPEG", "WEBP")


@dataclass(frozen=True)
class StyleInfo:
    """A style as :func:`styles` lists it."""

    id: str
    aliases: tuple[str, ...]
    title: str
    description: str
    licence: str  # the licence's id, e.g. "CC-BY-NC-4.0"; its terms are in the README's licence table
    commercial: bool  # whether the licence allows commercial use
    status: Literal["ready", "download", "unavailable"]
    reason: str | None  # what a download needs, or why the style is unavailable; None when ready


def _options(style: str | None, given: dict[str, Any]) -> PaintOptions:
    unknown = sorted(set(given) - set(_OPTION_NAMES))
    if unknown:
        raise OptionError(f"unknown option {', '.join(unknown)}; the options are {', '.join(_OPTION_NAMES)}")
    return PaintOptions(style=style, **given)


def _painter(options: PaintOptions, settings: Settings | None):
    from anipaint.painter import get_painter

    return get_painter(options.style, settings)


def _array_picture(array: np.ndarray) -> Image.Image:
    if array.dtype != np.uint8 or array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (3, 4)):
        raise ImageError(f"an array must be uint8 of shape (H, W), (H, W, 3) or (H, W, 4); got {array.dtype} "
                         f"{tuple(array.shape)}")
    return Image.fromarray(np.ascontiguousarray(array))


@overload
def paint(image: str | PathLike[str] | Image.Image, style: str | None = None, *, encoding: str = "PNG",
          progress: Progress | None = None, settings: Settings | None = None, **options: Any) -> Image.Image: ...
@overload
def paint(image: bytes | bytearray | memoryview | BinaryIO, style: str | None = None, *, encoding: str = "PNG",
          progress: Progress | None = None, settings: Settings | None = None, **options: Any) -> bytes: ...
@overload
def paint(image: np.ndarray, style: str | None = None, *, encoding: str = "PNG",
          progress: Progress | None = None, settings: Settings | None = None, **options: Any) -> np.ndarray: ...


def paint(image: Any, style: str | None = None, *, encoding: str = "PNG", progress: Progress | None = None,
          settings: Settings | None = None, **options: Any) -> Image.Image | bytes | np.ndarray:
    """Paint a picture in a style and give it back in the type it came in.

    ``image`` is a path, bytes, a binary file object, a PIL image or a uint8 numpy array ((H, W), (H, W, 3) or
    (H, W, 4)). A path or PIL image gives a PIL image; bytes or a file give the picture encoded as ``encoding``
    (PNG, JPEG or WEBP); an array gives a uint8 array of the same layout. ``style`` is a style id or alias
    (default: the configured default style, v3-hayao). ``options`` are :class:`~anipaint.options.PaintOptions`'
    fields (``max_side``, ``faces``, ``strength``, ``portrait``, ``face_style``, ``background``), checked as the
    command line checks them: a bad value raises :class:`~anipaint.errors.OptionError` with a sentence.
    ``progress(stage, fraction)`` hears how far the paint is.

    >>> import anipaint
    >>> anipaint.paint("me.jpg").save("me-anime.png")                    # doctest: +SKIP
    >>> png = anipaint.paint(open("me.jpg", "rb").read(), style="shinkai")  # doctest: +SKIP
    """
    if encoding.upper() not in _ENCODINGS:
        raise OptionError(f"encoding must be one of {', '.join(_ENCODINGS)}, not {encoding!r}")
    asked = _options(style, options)
    kind = "array" if isinstance(image, np.ndarray) else "picture"
    if isinstance(image, (bytes, bytearray, memoryview)):
        kind, source = "bytes", bytes(image)
    elif hasattr(image, "read"):
        kind, source = "bytes", image.read()
    elif isinstance(image, (str, PathLike)):
        source = Path(image)
    elif isinstance(image, np.ndarray):
        source = _array_picture(image)
    elif isinstance(image, Image.Image):
        source = image
    else:
        raise ImageError(f"cannot paint a {type(image).__name__}: give a path, bytes, a file, a PIL image or an "
                         "array")
    result = _painter(asked, settings).paint_result(source, asked, progress=progress).image
    if kind == "bytes":
        out = io.BytesIO()
        imaging.write_image(result, out, encoding)
        return out.getvalue()
    if kind == "array":
        mode = {2: "L", 3: "RGB", 4: "RGBA"}[image.shape[2] if image.ndim == 3 else 2]
        return np.asarray(result.convert(mode))
    return result


def paint_video(src: str | PathLike[str], dst: str | PathLike[str], style: str | None = None, *,
                progress: FrameProgress | None = None, settings: Settings | None = None, **options: Any) -> dict:
    """Paint a video (MP4, MOV, WebM, …) or an animated picture (GIF, WebP, APNG) frame by frame into ``dst``.

    A video comes out as H.264 at the source's frame rate with its sound; an animated picture in ``dst``'s format
    with its frame timings. Frames are kept steady along the motion unless ``temporal=False``. ``options`` are
    :func:`paint`'s; ``progress(done, total)`` hears each frame. Returns what was painted: frames, width, height.

    >>> import anipaint
    >>> anipaint.paint_video("clip.mp4", "clip-anime.mp4", style="hayao")  # doctest: +SKIP
    """
    from anipaint.media import animation, video

    src_path, dst_path = Path(src), Path(dst)
    if not src_path.is_file():
        raise ImageError(f"{src_path}: no such file")
    asked = _options(style, options)
    painter = _painter(asked, settings)
    moving = video.paint_video if video.is_video(src_path) else animation.paint_animation
    return moving(painter, src_path, dst_path, asked, on_frame=progress)


def styles(settings: Settings | None = None) -> list[StyleInfo]:
    """Every style: its id, aliases, title, licence, and whether it is ready here, needs a download (done on first
    use unless offline), or is unavailable and why.

    >>> import anipaint
    >>> [s.id for s in anipaint.styles() if s.status == "ready"]  # doctest: +SKIP
    """
    s = settings if settings is not None else get_settings()
    here = {st.style.id: st for st in availability.style_status(s)}
    out = []
    for style in all_styles():
        st = here.get(style.id)
        if st is None:
            status, reason = "unavailable", "its licence does not allow commercial use (commercial-only mode)"
        elif st.converted or all(sources.locate_source(src, s) for src in style.sources):
            status, reason = "ready", None
        elif sources.downloadable(style, s) and (st.available or not s.fetches_on_first_use):
            status = "download"
            reason = st.reason if s.fetches_on_first_use else availability.missing_style(style, s)
        else:
            status, reason = "unavailable", availability.missing_style(style, s)
        out.append(StyleInfo(style.id, aliases_of(style.id), style.label, style.description, style.licence.id,
                             style.licence.commercial, status, reason))
    return out
