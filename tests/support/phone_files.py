"""Pictures as phones write them: HEIC or AVIF with a maker, a GPS block and an EXIF orientation."""

from __future__ import annotations

import io

from PIL import Image

ORIENTATION = 0x0112

def phone_file(img: Image.Image, fmt: str, orientation: int = 1) -> bytes:
    """``img`` encoded as a phone would, with a maker, a GPS block and ``orientation`` in its EXIF."""
    exif = Image.Exif()
    exif[0x010F] = "PhoneMaker"
    exif[0x8825] = {1: "N"}
    exif[ORIENTATION] = orientation
    buf = io.BytesIO()
    img.save(buf, format=fmt, exif=exif.tobytes(), quality=90)
    return buf.getvalue()

def upright(img: Image.Image, orientation: int) -> Image.Image:
    return img.transpose(Image.Transpose.ROTATE_270) if orientation == 6 else img  # 6: turn 90° clockwise
