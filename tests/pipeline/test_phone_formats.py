"""Phone photos as they come: HEIC/HEIF (pillow-heif) and AVIF (Pillow's own), made here from the sample photo,
through the library, the API and the CLI; upright, metadata dropped. The formats named to people (the 415 reason,
the API's field, the page, the README, the CLI's folder scan) all follow from ``imaging.READABLE``."""

from __future__ import annotations

import base64
import io
import random
import re
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pillow_heif
import pytest
from PIL import Image, features

from anipaint import imaging
from anipaint.cli import convert
from anipaint.errors import ImageError
from anipaint.imaging import load_image
from anipaint.media import video
from anipaint.service import clips
from support.paths import REPO, SAMPLES
from support.phone_files import phone_file, upright
from support.service import InProcessServer, fast_style, in_process_server

pillow_heif.register_heif_opener()  # to write HEIC here; anipaint.imaging registers it for reading by itself
PHONE_FORMATS = (("HEIF", "IMG_0001.HEIC", "image/heic"), ("AVIF", "photo.avif", "image/avif"))


@pytest.fixture(scope="module")
def photo(group_photo: Image.Image) -> Image.Image:
    return group_photo.resize((120, 80), Image.Resampling.LANCZOS)  # landscape, so a rotation shows




@pytest.mark.parametrize("fmt", ["HEIF", "AVIF"])
def test_phone_photos_are_pictures_not_videos(photo: Image.Image, fmt: str) -> None:
    """HEIC and AVIF are ISO base media files like MP4: only their brands tell them from a clip."""
    assert video.looks_like_video(phone_file(photo, fmt, 6)) is None
    assert video.looks_like_video((SAMPLES / "realshort.mp4").read_bytes()) == "mp4"




def _psnr(a: Image.Image, b: Image.Image) -> float:
    mse = np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2)
    return float(10 * np.log10(255.0**2 / max(mse, 1e-9)))


@pytest.mark.parametrize("orientation", [1, 6])
@pytest.mark.parametrize("fmt", ["HEIF", "AVIF"])
def test_load_image_reads_phone_formatsupright(photo: Image.Image, fmt: str, orientation: int) -> None:
    assert features.check("avif"), "this Pillow reads no AVIF"
    data = phone_file(photo, fmt, orientation)
    assert imaging.probe_image(data)[2] == fmt  # opened by its own opener, not another format's
    loaded = imaging.load_image(data)
    want = upright(photo, orientation)
    assert loaded.size == want.size and loaded.mode == "RGB"
    assert loaded.info == {} and not loaded.getexif()
    assert _psnr(loaded, want) > 28


def test_import_does_not_load_pillow_heif() -> None:
    code = "import sys, anipaint.imaging; assert 'pillow_heif' not in sys.modules, 'imported at import time'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def server(prepared_store, tmp_path_factory) -> InProcessServer:
    with in_process_server(tmp_path_factory.mktemp("phone")) as s:
        yield s


def _post(server: InProcessServer, data: bytes, name: str, mime: str = "application/octet-stream"):
    fields = {"style": fast_style(), "faces": "false", "max_side": "64"}
    return server.client.post("/predict", files={"image": (name, data, mime)}, data=fields)


@pytest.mark.parametrize("fmt, name, mime", PHONE_FORMATS)
def test_predict_paints_phone_photosupright(server: InProcessServer, photo: Image.Image, fmt, name, mime) -> None:
    res = _post(server, phone_file(photo, fmt, 6), name, mime)
    assert res.status_code == 200, res.text
    body = res.json()
    png = base64.b64decode(body["result"])
    result = Image.open(io.BytesIO(png))
    assert result.format == "PNG" and result.size == (body["width"], body["height"])
    assert result.height == 64 and result.width < result.height  # upright: 80×120 scaled to a 64 px long side
    assert not result.getexif() and b"eXIf" not in png and b"tEXt" not in png


def test_refusals_name_the_phone_formats_and_eps_pdf_stay_refused(server: InProcessServer) -> None:
    res = _post(server, b"shopping list: eggs, milk\n", "notes.txt", "text/plain")
    assert res.status_code == 415, res.text
    detail = res.json()["detail"]
    assert imaging.FORMAT_NAMES in detail and "HEIC" in detail and "AVIF" in detail
    eps = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 64 64\n0 0 moveto 64 64 lineto stroke\nshowpage\n%%EOF\n"
    pdf = b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
    for name, data in (("a.eps", eps), ("a.pdf", pdf)):
        assert _post(server, data, name).status_code == 415, name
    assert f"The photo ({imaging.FORMAT_NAMES})" in server.client.get("/openapi.json").text


def test_cli_converts_a_heic(prepared_store, photo: Image.Image, tmp_path: Path) -> None:
    src, out = tmp_path / "IMG_0001.HEIC", tmp_path / "out.png"
    src.write_bytes(phone_file(photo, "HEIF", 6))
    args = ["convert", str(src), str(out), "--style", fast_style(), "--max-side", "64", "--no-faces"]
    proc = subprocess.run([sys.executable, "-m", "anipaint.cli", *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = Image.open(out)
    assert result.height == 64 and result.width < result.height
    assert not result.getexif()


def _one_line(path: Path) -> str:
    return " ".join(path.read_text().split())


def test_every_list_of_formats_follows_from_the_allowlist() -> None:
    static = REPO / "anipaint" / "service" / "static"
    page = (static / "index.html").read_text()
    file_input = re.search(r'<input[^>]*id="file-input"[^>]*>', page).group(0)
    # The pictures, then the videos /api/jobs takes (animated pictures are among the pictures).
    assert f'accept="{imaging.ACCEPT},{clips.VIDEO_ACCEPT}"' in file_input
    assert f"{imaging.FORMAT_NAMES} · up to" in page and f"Videos: {clips.VIDEO_NAMES}, or an animated" in page
    strings = (static / "i18n.js").read_text()
    assert f'"drop.limit": "{imaging.FORMAT_NAMES} · up to {{mb}} MB"' in strings
    assert "、".join(f.label for f in imaging.READABLE) in strings
    assert f'"drop.clip": "Videos: {clips.VIDEO_NAMES}, or an animated GIF, WebP or PNG' in strings
    assert "、".join(f.label for f in clips.VIDEO_FORMATS) in strings
    video_suffixes = [suffix for f in clips.VIDEO_FORMATS for suffix in f.suffixes]
    assert {convert.kind_of(Path("clip" + suffix)) for suffix in video_suffixes} == {"video"}
    assert clips.clip_of((SAMPLES / "realshort.mp4").read_bytes()) == "video"
    assert _one_line(REPO / "README.md").count(imaging.FORMAT_NAMES) >= 2
    assert {convert.kind_of(Path("photo" + suffix)) for suffix in imaging.SUFFIXES} == {"picture"}
    assert not {"EPS", "PS", "PDF"} & set(imaging.FORMATS)


def _damaged(data: bytes, rng: random.Random) -> bytes:
    """A file with a few bytes flipped, as a bad transfer or a fuzzer leaves it."""
    damaged = bytearray(data)
    for _ in range(rng.choice((1, 4, 32))):
        damaged[rng.randrange(len(damaged))] = rng.randrange(256)
    return bytes(damaged)


@pytest.mark.parametrize("fmt, name, mime", PHONE_FORMATS)
def test_damaged_phone_files_are_refused_with_a_reason(server: InProcessServer, photo: Image.Image, fmt, name,
                                                       mime) -> None:
    """Found by a run of odd files through the API (benchmarks/odd_files.py): AVIF files with flipped bytes made
    Pillow raise RuntimeError, answered 500; then again in the sniffing for animated uploads, which opens the file
    before it is read. Every damaged file is either read or refused as not a picture."""
    from anipaint.service.clips import clip_of

    rng = random.Random(16)
    clean = phone_file(photo.resize((160, 106)), fmt)
    refused = []
    for _ in range(120):
        data = _damaged(clean, rng)
        assert clip_of(data) is None  # a still picture or nothing Pillow can open: never an exception
        try:
            load_image(data)
        except ImageError:
            refused.append(data)
    assert refused, "no damaged file was refused: the damage did not reach the decoder"
    for data in refused:  # refused before any painting, so each costs a few milliseconds
        res = _post(server, data, name, mime)
        # 413 where the damage made the header claim a size over the limit
        assert res.status_code in (413, 415) and res.json()["detail"], res.text


def _claiming(width: int, height: int) -> bytes:
    """A small PNG whose header says ``width``×``height``: refused from the header, before any pixel is decoded."""
    buf = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buf, format="PNG")
    png = bytearray(buf.getvalue())
    png[16:24] = width.to_bytes(4, "big") + height.to_bytes(4, "big")
    png[29:33] = zlib.crc32(bytes(png[12:29])).to_bytes(4, "big")  # IHDR's type and data
    return bytes(png)


@pytest.mark.parametrize("fmt, name, mime", PHONE_FORMATS)
def test_preview_is_the_photo_upright_as_a_clean_png(server: InProcessServer, photo: Image.Image, fmt, name,
                                                     mime) -> None:
    """POST /api/preview: what the page shows for a photo the browser cannot decode. Upright, no metadata, capped
    as a paint at that size is capped (so it has the painted picture's size), no painting."""
    data = phone_file(photo, fmt, 6)
    for fields, size in (({"max_side": "64"}, (43, 64)), ({}, (80, 120)), ({"max_side": "original"}, (80, 120))):
        res = server.client.post("/api/preview", files={"image": (name, data, mime)}, data=fields)
        assert res.status_code == 200, res.text
        assert res.headers["content-type"] == "image/png"
        shown = Image.open(io.BytesIO(res.content))
        assert shown.format == "PNG" and shown.size == size, fields
        assert not shown.getexif() and b"eXIf" not in res.content and b"tEXt" not in res.content
    assert _psnr(shown.convert("RGB"), upright(photo, 6)) > 28
    painted = _post(server, data, name, mime).json()
    assert (painted["width"], painted["height"]) == (43, 64)  # the same cap, the same size


def test_preview_refuses_what_the_paint_routes_refuse(server: InProcessServer) -> None:
    for data, status, said in ((b"shopping list: eggs, milk\n", 415, imaging.FORMAT_NAMES),
                               (b"", 415, "empty"), (_claiming(9000, 9000), 413, "MP")):
        res = server.client.post("/api/preview", files={"image": ("IMG_0002.HEIC", data, "image/heic")})
        assert res.status_code == status and res.headers["content-type"] == "application/json", res.text
        assert said in res.json()["detail"]
    res = server.client.post("/api/preview", files={"image": ("a.png", _claiming(8, 8), "image/png")},
                             data={"max_side": "7"})
    assert res.status_code == 422 and "max_side" in res.json()["detail"]
