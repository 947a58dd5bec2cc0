"""A large, varied set of odd and hostile picture files through a real server's /predict: counts by status, the
5xx (there must be none) and the server's peak RSS.

The corpus is made here, seeded, from real photos (the shared samples and skimage.data): every format and colour
mode Pillow writes (HEIC and AVIF included), EXIF orientations, animations, files cut short, files with bytes
flipped, decompression bombs, oversized metadata chunks, and things that are not pictures at all (text, HTML, SVG,
EPS, PDF, ZIP, random bytes, empty).

    .venv/bin/python benchmarks/odd_files.py [--count-mutations 400] [--json artifacts/odd_files.json]
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from pathlib import Path

import httpx
import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parent.parent
MODES = ("RGB", "RGBA", "L", "LA", "P", "1", "I;16", "I", "F", "CMYK")
FORMATS = ("JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF", "AVIF", "HEIF", "PPM", "TGA", "ICO", "PCX", "SGI", "IM",
           "JPEG2000", "EPS", "PDF", "XBM", "SPIDER", "QOI", "MSP", "DDS", "BLP")


def photos() -> list[Image.Image]:
    from skimage import data

    out = [Image.open(REPO.parent / "shared" / "samples" / "group_pakutaso.jpg").convert("RGB")]
    out += [Image.fromarray(getattr(data, name)()) for name in ("astronaut", "coffee", "chelsea", "rocket", "camera")]
    return [im.resize((max(1, im.width * 160 // max(im.size)), max(1, im.height * 160 // max(im.size))))
            for im in out]


def encoded(img: Image.Image, fmt: str, **params: object) -> bytes | None:
    buf = io.BytesIO()
    try:
        img.save(buf, format=fmt, **params)
    except Exception:  # this format does not take this mode: not part of the corpus
        return None
    return buf.getvalue()


def corpus(mutations: int) -> dict[str, bytes]:
    import pillow_heif

    pillow_heif.register_heif_opener()
    rng = random.Random(16)
    files: dict[str, bytes] = {}
    bases = photos()
    for i, photo in enumerate(bases):
        for mode in MODES:
            img = photo.convert(mode) if mode not in ("I;16", "I", "F") else photo.convert("L").convert(mode)
            for fmt in FORMATS:
                data = encoded(img, fmt)
                if data:
                    files[f"p{i}-{mode.replace(';', '')}.{fmt.lower()}"] = data
        for orientation in range(1, 9):
            exif = Image.Exif()
            exif[0x0112] = orientation
            files[f"p{i}-orient{orientation}.jpg"] = encoded(photo, "JPEG", exif=exif.tobytes())
        frames = [photo.rotate(a) for a in (0, 10, 20)]
        files[f"p{i}-anim.gif"] = encoded(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=80)
        files[f"p{i}-anim.webp"] = encoded(frames[0], "WEBP", save_all=True, append_images=frames[1:], duration=80)
    clean = [name for name in files if name.split(".")[-1] in ("jpeg", "png", "webp", "heif", "avif", "gif", "tiff")]
    for name in clean[:60]:
        data = files[name]
        for cut in (0.1, 0.5, 0.9):
            files[f"cut{int(cut * 100)}-{name}"] = data[: max(1, int(len(data) * cut))]
    for k in range(mutations):
        name = rng.choice(clean)
        data = bytearray(files[name])
        for _ in range(rng.choice((1, 4, 32))):
            data[rng.randrange(len(data))] = rng.randrange(256)
        files[f"flip{k}-{name}"] = bytes(data)
    files.update(hostile())
    return {k: v for k, v in files.items() if v is not None}


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


def hostile() -> dict[str, bytes]:
    side = 30000  # 900 MP of zeros compresses to a few hundred kB
    rows = zlib.compress(b"\x00" * (side + 1) * 64, 9)
    bomb = (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0))
            + _png_chunk(b"IDAT", rows) + _png_chunk(b"IEND", b""))
    small = encoded(Image.new("RGB", (32, 32), (200, 80, 40)), "PNG")
    assert small is not None
    text_bomb = small[:33] + _png_chunk(b"zTXt", b"k\x00\x00" + zlib.compress(b"a" * (64 << 20), 9)) + small[33:]
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr("photo.jpg", b"not really")
    gif = bytearray(encoded(Image.new("P", (8, 8)), "GIF") or b"")
    gif[6:10] = struct.pack("<HH", 65535, 65535)  # a header claiming 4 GP
    return {
        "bomb.png": bomb, "ztxt-bomb.png": text_bomb, "huge-header.gif": bytes(gif), "empty.jpg": b"",
        "text.jpg": b"hello, this is not a photo\n" * 20, "page.html": b"<html><body><img src=x></body></html>",
        "drawing.svg": b'<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"><rect width="9"/></svg>',
        "script.eps": b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n",
        "doc.pdf": b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF", "archive.zip": zipped.getvalue(),
        "random.bin": np.random.default_rng(16).integers(0, 256, 50_000, dtype=np.uint8).tobytes(),
        "one-pixel.png": encoded(Image.new("RGB", (1, 1)), "PNG") or b"",
    }


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count-mutations", type=int, default=400)
    parser.add_argument("--style", default="v3-cute")
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args()
    files = corpus(args.count_mutations)
    port = 18000 + os.getpid() % 1000
    env = {**os.environ, "ANIPAINT_PORT": str(port), "ANIPAINT_DEFAULT_STYLE": args.style, "ANIPAINT_FACES": "0",
           "ANIPAINT_BACKGROUND": "off", "ANIPAINT_LOG_LEVEL": "warning",
           "ANIPAINT_DATA_DIR": tempfile.mkdtemp(prefix="odd-files-jobs-")}
    server = subprocess.Popen([sys.executable, "-m", "anipaint.cli", "serve"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    statuses: collections.Counter[int] = collections.Counter()
    by_kind: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    errors: list[str] = []
    start = time.monotonic()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as client:
            deadline = time.monotonic() + 300
            while True:
                try:
                    if client.get("/readyz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert server.poll() is None and time.monotonic() < deadline, "server did not start"
                time.sleep(0.5)
            for name, data in files.items():
                try:
                    res = client.post("/predict", files={"image": (name, data, "application/octet-stream")},
                                      data={"max_side": "64"})
                except httpx.TransportError as exc:  # the server hung up instead of answering
                    statuses[0] += 1
                    errors.append(f"{name} ({len(data)} bytes): no answer: {exc!r}")
                    continue
                statuses[res.status_code] += 1
                by_kind[name.split("-")[0].rstrip("0123456789") or name][res.status_code] += 1
                if res.status_code >= 500 or not res.headers.get("content-type", "").startswith("application/json"):
                    errors.append(f"{name}: {res.status_code} {res.text[:200]}")
                elif res.status_code != 200 and not res.json().get("detail"):
                    errors.append(f"{name}: {res.status_code} without a reason")
            alive = server.poll() is None and client.get("/healthz").status_code == 200
        rss = peak_rss_mb(server.pid)
    finally:
        server.terminate()
        server.wait(60)
    report = {"files": len(files), "statuses": dict(sorted(statuses.items())), "errors": errors,
              "server_alive_after": alive, "peak_rss_mb": round(rss), "seconds": round(time.monotonic() - start),
              "by_kind": {k: dict(sorted(v.items())) for k, v in sorted(by_kind.items())}}
    print(json.dumps(report, indent=1))
    if args.json_path:
        Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_path).write_text(json.dumps(report, indent=1))
    return 0 if not errors and alive else 1


if __name__ == "__main__":
    sys.exit(main())
