"""An iPhone photo (HEIC, EXIF orientation 6) on the page in headless Chromium, which cannot decode HEIC: the page
shows, compares and re-blends the server's upright PNG of it (POST /api/preview) and still paints the HEIC."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from anipaint.quality import psnr
from support.page import canvas_pixels, open_page, set_strength
from support.phone_files import phone_file
from support.phone_files import upright as turned_upright
from support.service import Server, fast_style

SHOT = Path("/tmp/page-shots/heic.png")
# What the page sends as its form's picture, per request: [route, file name, bytes].
RECORD_UPLOADS = """
window.uploads = [];
const send = window.fetch;
window.fetch = (url, init) => {
  const image = init && init.body instanceof FormData ? init.body.get("image") : null;
  if (image) window.uploads.push([String(url), image.name, image.size]);
  return send(url, init);
};
"""
pytestmark = pytest.mark.timeout(300)


def _natural_size(page, testid: str) -> tuple[int, int] | None:
    # decode() rejects when the page swaps the picture's src meanwhile (a new size's preview): None, ask again.
    size = page.locator(f'[data-testid="{testid}"]').evaluate(
        "async (img) => { try { await img.decode(); } catch (_) { return null; }"
        " return [img.naturalWidth, img.naturalHeight]; }"
    )
    return tuple(size) if size else None


def _wait_natural_size(page, testid: str, want: tuple[int, int], timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.1)):
        if _natural_size(page, testid) == want:
            return
        page.wait_for_timeout(100)
    assert _natural_size(page, testid) == want


def test_a_heic_photo_is_shown_compared_and_reblended(server: Server, page_factory,  # noqa: F811
                                                      group_photo: Image.Image, tmp_path: Path) -> None:
    # As a phone held sideways stores it: the pixels turned a quarter left, EXIF orientation 6 to turn them back.
    scene = group_photo.crop((0, 150, 900, 750)).resize((768, 512), Image.Resampling.LANCZOS)
    stored = scene.transpose(Image.Transpose.ROTATE_90)
    src = tmp_path / "IMG_0001.HEIC"
    heic = phone_file(stored, "HEIF", 6)
    src.write_bytes(heic)
    upright = np.asarray(turned_upright(stored, 6))
    assert upright.shape == (512, 768, 3) and np.array_equal(upright, np.asarray(scene))
    page = page_factory()
    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text) if msg.type == "error" else None)
    page.add_init_script(RECORD_UPLOADS)
    open_page(page, server)
    decodes = ("(b64) => createImageBitmap(new Blob([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))]))"
               ".then(() => true, () => false)")
    assert page.evaluate(decodes, base64.b64encode(heic).decode()) is False  # this browser cannot show a HEIC

    page.set_input_files('[data-testid="file-input"]', str(src))
    page.wait_for_selector('[data-testid="preview"]:visible')
    _wait_natural_size(page, "preview", (512, 341))  # upright, capped at the chosen 512
    page.click('[data-testid="size-1024"]')  # another size: a preview at that size, the painted picture's
    _wait_natural_size(page, "preview", (768, 512))
    page.click(f'[data-testid="style-{fast_style()}"]')
    if page.is_checked('[data-testid="faces"]'):
        page.click('label[for="faces"]')  # the switch: faces off, a quicker paint
    page.click('[data-testid="paint"]')
    page.wait_for_selector("body[data-state='done']", state="attached", timeout=120_000)
    assert page.locator('[data-testid="message"]').is_hidden()

    painted = tuple(page.evaluate("[document.getElementById('after').width, document.getElementById('after').height]"))
    assert painted == (768, 512)
    _wait_natural_size(page, "before-image", painted)  # the before side is the painted picture's size
    uploads = page.evaluate("window.uploads")
    heic_part = [src.name, len(heic)]  # the HEIC itself is painted, not the preview
    assert uploads == [["/api/preview", *heic_part], ["/api/preview", *heic_part], ["/api/jobs", *heic_part]]

    full = canvas_pixels(page)
    set_strength(page, 0)
    assert psnr(canvas_pixels(page), upright) >= 30.0  # the upright photo under the slider
    set_strength(page, 50)
    half = canvas_pixels(page)
    assert 20.0 < psnr(half, full) < 40.0 and 20.0 < psnr(half, upright) < 40.0
    SHOT.parent.mkdir(parents=True, exist_ok=True)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(SHOT), full_page=True)
    assert not console, console
