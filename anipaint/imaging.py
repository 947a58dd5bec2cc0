"""Pictures in and out: decode and validate, apply EXIF orientation, normalise colour modes; encode clean PNGs.

Everything that touches file formats lives here, so the CLI and the web service never decode images themselves.
"""

from __future__ import annotations

import functools
import io
import warnings
from pathlib import Path
from typing import BinaryIO, NamedTuple

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from anipaint.errors import ImageError, ImageTooLargeError

ImageInput = Image.Image | bytes | bytearray | str | Path | BinaryIO

# Pillow's own bomb guard is replaced by our pixel limit, which callers pass explicitly.
Image.MAX_IMAGE_PIXELS = None


class Format(NamedTuple):
    name: str  # Pillow's, as Image.open(formats=...) takes it
    label: str  # what people call it
    mime_types: tuple[str, ...]
    suffixes: tuple[str, ...]


# The formats we read, an allowlist written once: the 415 reason, the API's field description, the page's file
# input and hint, the CLI's folder scan and the README follow from it (tests/pipeline/test_phone_formats.py holds the
# static files to it). Phone JPEGs that Pillow calls MPO come through its JPEG opener; AVIF is Pillow's own, HEIC/HEIF
# pillow-heif's, and AVIF is tried first because some AVIF files carry HEIF's generic brand. Never EPS/PS/PDF or
# anything else that would hand an upload to an external interpreter.
READABLE = (
    Format("JPEG", "JPEG", ("image/jpeg",), (".jpg", ".jpeg")),
    Format("PNG", "PNG", ("image/png",), (".png",)),
    Format("WEBP", "WebP", ("image/webp",), (".webp",)),
    Format("GIF", "GIF", ("image/gif",), (".gif",)),
    Format("BMP", "BMP", ("image/bmp",), (".bmp",)),
    Format("TIFF", "TIFF", ("image/tiff",), (".tif", ".tiff")),
    Format("AVIF", "AVIF", ("image/avif",), (".avif",)),
    Format("HEIF", "HEIC/HEIF", ("image/heic", "image/heif"), (".heic", ".heif")),
)
FORMATS = tuple(f.name for f in READABLE)
SUFFIXES = tuple(suffix for f in READABLE for suffix in f.suffixes)
# "JPEG, PNG, …, AVIF or HEIC/HEIF", for messages and documentation
FORMAT_NAMES = ", ".join(f.label for f in READABLE[:-1]) + " or " + READABLE[-1].label
# The page's <input type="file" accept=…>: MIME types, and the suffixes for systems that know no HEIC/AVIF type
ACCEPT = ",".join([m for f in READABLE for m in f.mime_types] + list(SUFFIXES))


@functools.cache
def _register_heif() -> None:
    """pillow-heif's HEIC/HEIF opener, registered on the first picture opened rather than at import (~40 ms)."""
    import pillow_heif

    pillow_heif.register_heif_opener(thumbnails=False, depth_images=False, aux_images=False)


def _open(data: ImageInput) -> Image.Image:
    if isinstance(data, (str, Path)) and not Path(data).is_file():
        raise ImageError(f"{data}: no such file")
    _register_heif()
    try:
        if isinstance(data, (bytes, bytearray)):
            return Image.open(io.BytesIO(bytes(data)), formats=FORMATS)
        if isinstance(data, (str, Path)):
            return Image.open(Path(data), formats=FORMATS)
        return Image.open(data, formats=FORMATS)
    except UnidentifiedImageError:
        raise ImageError(f"not an image, or a format we do not read ({FORMAT_NAMES})") from None
    except ValueError:  # Pillow's guard against text and colour-profile chunks that inflate without end
        raise ImageTooLargeError("the image's metadata (a text or colour-profile chunk) is too large") from None
    except (OSError, RuntimeError) as exc:  # the AVIF and HEIF decoders report a damaged file as RuntimeError
        raise ImageError(f"cannot read the image: {exc}") from None


def probe_image(data: ImageInput) -> tuple[int, int, str]:
    """(width, height, format) from the file header alone, before any pixel is decoded."""
    img = _open(data)
    return img.width, img.height, img.format or "unknown"


def check_limits(width: int, height: int, max_pixels: int | None) -> None:
    if max_pixels and width * height > max_pixels:
        raise ImageTooLargeError(
            f"image is {width}×{height} = {width * height / 1e6:.1f} MP; the limit is {max_pixels / 1e6:.0f} MP"
        )


def _to_8bit(img: Image.Image) -> Image.Image:
    """16-bit and float greyscale → 8-bit L, scaling by the mode's range instead of clipping."""
    arr = np.asarray(img)
    if img.mode.startswith("I;16") or (img.mode == "I" and arr.max(initial=0) > 255):
        scaled = arr.astype(np.float64) / 257.0
    elif img.mode == "F":
        peak = float(arr.max(initial=0))
        scaled = arr * (255.0 if peak <= 1.0 else 1.0)
    else:
        scaled = arr
    return Image.fromarray(np.clip(np.rint(scaled), 0, 255).astype(np.uint8), "L")


def normalise_mode(img: Image.Image) -> Image.Image:
    """Any Pillow mode → RGB, or RGBA when the picture has transparency."""
    if img.mode in ("RGB", "RGBA"):
        return img
    if img.mode in ("I", "I;16", "I;16B", "I;16L", "I;16N", "F"):
        return _to_8bit(img).convert("RGB")
    if img.mode == "P":
        return img.convert("RGBA" if "transparency" in img.info else "RGB")
    if img.mode in ("LA", "PA", "La", "RGBa"):
        return img.convert("RGBA")
    if img.mode == "CMYK":
        # Adobe-style JPEGs store inverted CMYK; Pillow's conversion handles the common case.
        return img.convert("RGB")
    return img.convert("RGB")


def load_image(data: ImageInput, *, max_pixels: int | None = None) -> Image.Image:
    """Decode a picture into an upright RGB or RGBA image with no metadata attached.

    Raises :class:`ImageError` for anything that is not a readable picture and
    :class:`ImageTooLargeError` when ``max_pixels`` is exceeded (checked before decoding).
    """
    if isinstance(data, Image.Image):
        img = data
    else:
        img = _open(data)
        check_limits(img.width, img.height, max_pixels)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                img.load()
        except (OSError, SyntaxError, ValueError, RuntimeError) as exc:
            raise ImageError(f"the image is corrupt or truncated: {exc}") from None
    if getattr(img, "n_frames", 1) > 1 and img.format != "HEIF":
        img.seek(0)  # animations: the first frame (a HEIF collection stays on its primary picture, where it opens)
    try:
        img = ImageOps.exif_transpose(img)
    except Exception:  # broken EXIF should not cost the user their picture
        pass
    img = normalise_mode(img)
    clean = img.copy()
    clean.info = {}
    return clean


# zlib level 1: a 512 px painting encodes in ~18 ms instead of ~77 ms at Pillow's default 6 (a fifth of the
# whole paint on a fast engine), for files ~12 % larger; PNG stays lossless either way.
PNG_LEVEL = 1


def encode_png(img: Image.Image, *, compress_level: int = PNG_LEVEL) -> bytes:
    """PNG bytes with no metadata (no EXIF, no text chunks)."""
    buf = io.BytesIO()
    stripped = Image.frombytes(img.mode, img.size, img.tobytes())
    stripped.save(buf, format="PNG", compress_level=compress_level)
    return buf.getvalue()


# What a painted picture can be written as, by suffix.
WRITABLE = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".webp": "WEBP"}


def write_image(img: Image.Image, out: Path | BinaryIO, fmt: str) -> None:
    """Write ``img`` as PNG, JPEG or WEBP with no metadata. JPEG drops alpha onto white."""
    stripped = Image.frombytes(img.mode, img.size, img.tobytes())
    fmt = fmt.upper()
    if fmt == "JPEG":
        if stripped.mode == "RGBA":
            background = Image.new("RGB", stripped.size, (255, 255, 255))
            background.paste(stripped, mask=stripped.getchannel("A"))
            stripped = background
        stripped.save(out, format="JPEG", quality=95)
    elif fmt == "WEBP":
        stripped.save(out, format="WEBP", quality=95)
    else:
        stripped.save(out, format="PNG", compress_level=PNG_LEVEL)


def save_image(img: Image.Image, path: Path) -> None:
    """Save by extension (PNG for any other); metadata is never written."""
    path = Path(path)
    write_image(img, path, WRITABLE.get(path.suffix.lower(), "PNG"))
