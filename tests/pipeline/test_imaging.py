"""Every input mode the library promises, through the real pipeline (decode → paint → encode)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from anipaint import imaging
from anipaint.errors import ImageError, ImageTooLargeError

FAST_STYLE = "v3-cute"  # the quickest real model; these tests are about pixels in and out, not the look


@pytest.fixture(scope="module")
def painter(prepared_store):
    from anipaint import get_painter

    return get_painter(FAST_STYLE)


def _photo(size=(300, 200)) -> Image.Image:
    data = pytest.importorskip("skimage.data")
    return Image.fromarray(data.chelsea()).resize(size)


def _encode(img: Image.Image, fmt: str, **kwargs) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kwargs)
    return buf.getvalue()


def test_exif_orientation_is_applied():
    img = _photo((300, 200))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise to display
    loaded = imaging.load_image(_encode(img, "JPEG", exif=exif))
    assert loaded.size == (200, 300)
    assert loaded.info == {}


def test_output_has_no_metadata(painter):
    img = _photo()
    exif = Image.Exif()
    exif[0x010F] = "CameraMaker"
    exif[0x8825] = {1: "N"}  # a GPS block: must never come out the other side
    result = painter.paint(_encode(img, "JPEG", exif=exif), faces=False)
    png = imaging.encode_png(result)
    reread = Image.open(io.BytesIO(png))
    assert not reread.getexif()
    assert b"eXIf" not in png and b"tEXt" not in png and b"iTXt" not in png


@pytest.mark.parametrize(
    "mode, expect",
    [("RGBA", "RGBA"), ("LA", "RGBA"), ("L", "RGB"), ("P", "RGB"), ("CMYK", "RGB"), ("I;16", "RGB"), ("1", "RGB")],
)
def test_colour_modes_paint_to_the_right_mode_and_size(painter, mode, expect):
    base = _photo((240, 160))
    alpha = np.zeros((160, 240), np.uint8)
    alpha[:, 120:] = 255  # left half transparent
    if mode in ("RGBA", "LA"):
        img = base.convert(mode)
        img.putalpha(Image.fromarray(alpha))
        data = _encode(img, "PNG")
    elif mode == "I;16":
        grey = np.asarray(base.convert("L"), np.uint16) * 257
        data = _encode(Image.fromarray(grey), "PNG")
    elif mode == "CMYK":
        data = _encode(base.convert("CMYK"), "JPEG")
    elif mode == "P":
        data = _encode(base.convert("P", palette=Image.Palette.ADAPTIVE), "PNG")
    else:
        data = _encode(base.convert(mode), "PNG")
    result = painter.paint(data, faces=False)
    assert result.mode == expect
    assert result.size == (240, 160)
    arr = np.asarray(result.convert("RGB"), np.float64)
    assert arr.std() > 5  # a real picture came out, not a flat fill
    if expect == "RGBA":
        out_alpha = np.asarray(result.getchannel("A"))
        assert out_alpha[:, :100].max() == 0 and out_alpha[:, 140:].min() == 255


def test_sixteen_bit_grey_is_scaled_not_clipped():
    ramp = (np.linspace(0, 65535, 256, dtype=np.float64)[None, :].repeat(8, 0)).astype(np.uint16)
    loaded = imaging.load_image(_encode(Image.fromarray(ramp), "PNG"))
    arr = np.asarray(loaded)[..., 0]
    assert arr.min() == 0 and arr.max() == 255 and len(np.unique(arr)) > 200


def test_long_side_cap_and_full_resolution(painter):
    img = _photo((800, 400))
    assert painter.paint(img, max_side=512, faces=False).size == (512, 256)
    assert painter.paint(img, max_side=None, faces=False).size == (800, 400)
    assert painter.paint(_photo((300, 200)), max_side=512, faces=False).size == (300, 200)  # never upscales


def test_bad_inputs_raise_clear_errors(tmp_path):
    with pytest.raises(ImageError, match="not an image"):
        imaging.load_image(b"this is not a picture")
    jpeg = _encode(_photo(), "JPEG")
    with pytest.raises(ImageError):
        imaging.load_image(jpeg[: len(jpeg) // 2])
    with pytest.raises(ImageError, match="no such file"):
        imaging.load_image(tmp_path / "missing.jpg")
    with pytest.raises(ImageTooLargeError, match="MP"):
        imaging.load_image(jpeg, max_pixels=1000)
    assert imaging.probe_image(jpeg) == (300, 200, "JPEG")
