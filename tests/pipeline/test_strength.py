"""Style strength through the real pipeline, the CLI and the HTTP API: 0 is the photo, 1 the plain style, and the
steps between are even in Lab. (The page's slider is tested in test_page.py.)"""

from __future__ import annotations

import base64
import io
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from anipaint import get_painter, postprocess
from anipaint.errors import OptionError
from anipaint.quality import psnr
from support.service import running_server

STYLE = "v3-cute"  # the fastest style


@pytest.fixture(scope="module")
def painter(prepared_store):
    return get_painter(STYLE)


@pytest.fixture(scope="module")
def photo(astronaut) -> np.ndarray:
    return np.asarray(astronaut.convert("RGB"))  # 512×512: the working size, so no resize happens


@pytest.fixture(scope="module")
def plain(painter, photo) -> np.ndarray:
    return painter.paint_array(photo)


def _paint(painter, photo: np.ndarray, strength: float) -> np.ndarray:
    return np.asarray(painter.paint(Image.fromarray(photo), faces=False, strength=strength))


def test_zero_gives_the_photo_back_and_one_the_plain_style(painter, photo, plain) -> None:
    assert psnr(_paint(painter, photo, 0.0), photo) >= 40.0
    assert np.array_equal(_paint(painter, photo, 1.0), plain)
    assert psnr(plain, photo) < 25.0  # the style really changes the picture, so the two ends differ


def test_steps_of_strength_are_even_steps_in_lab(painter, photo, plain) -> None:
    lab_photo, lab_plain = postprocess.srgb_to_lab(photo), postprocess.srgb_to_lab(plain)
    full = np.linalg.norm(lab_plain - lab_photo, axis=-1).mean()
    for s in (0.25, 0.5, 0.75):
        mixed = postprocess.srgb_to_lab(_paint(painter, photo, s))
        from_photo = np.linalg.norm(mixed - lab_photo, axis=-1).mean()
        to_plain = np.linalg.norm(lab_plain - mixed, axis=-1).mean()
        assert from_photo / full == pytest.approx(s, abs=0.03)
        assert to_plain / full == pytest.approx(1 - s, abs=0.03)
    # Almost 1 is almost the plain style: the blend itself converges, not only its shortcut at exactly 1.
    assert psnr(postprocess.blend(photo, plain, 1 - 1e-9), plain) >= 50.0


def test_transparency_is_kept_at_any_strength(painter, photo) -> None:
    rgba = Image.fromarray(photo).convert("RGBA")
    alpha = np.full(photo.shape[:2], 255, np.uint8)
    alpha[:, :128] = 0
    rgba.putalpha(Image.fromarray(alpha))
    out = painter.paint(rgba, faces=False, strength=0.5)
    assert out.mode == "RGBA"
    assert np.array_equal(np.asarray(out)[..., 3], alpha)


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "strong"])
def test_out_of_range_strength_is_a_clear_error(painter, photo, bad) -> None:
    with pytest.raises(OptionError, match="strength"):
        painter.paint(Image.fromarray(photo), faces=False, strength=bad)


def test_cli_strength(prepared_store, astronaut, tmp_path) -> None:
    src = tmp_path / "astronaut.png"
    astronaut.save(src)

    def convert(strength: str) -> subprocess.CompletedProcess:
        out = tmp_path / f"out-{strength}.png"
        return subprocess.run(
            [sys.executable, "-m", "anipaint.cli", "convert", str(src), str(out), "--style", STYLE, "--no-faces",
             "--strength", strength],
            capture_output=True, text=True, timeout=300,
        )

    proc = convert("0")
    assert proc.returncode == 0, proc.stderr
    assert psnr(np.asarray(Image.open(tmp_path / "out-0.png").convert("RGB")), np.asarray(astronaut)) >= 40.0
    proc = convert("0.5")
    assert proc.returncode == 0, proc.stderr
    half = np.asarray(Image.open(tmp_path / "out-0.5.png").convert("RGB"))
    assert 25.0 < psnr(half, np.asarray(astronaut)) < 40.0  # visibly painted, visibly less than the full style
    proc = convert("2")
    assert proc.returncode == 2
    assert "strength must be from 0" in proc.stderr and "Traceback" not in proc.stderr


@pytest.fixture(scope="module")
def server(prepared_store, tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("strength")) as s:
        yield s


def test_api_strength(server, astronaut, photo) -> None:
    png = io.BytesIO()
    astronaut.save(png, format="PNG")

    def predict(**fields: str) -> np.ndarray:
        res = server.client.post("/predict", files={"image": ("a.png", png.getvalue(), "image/png")},
                                 data={"style": STYLE, "faces": "false", **fields})
        assert res.status_code == 200, res.text
        return np.asarray(Image.open(io.BytesIO(base64.b64decode(res.json()["result"]))).convert("RGB"))

    plain = predict()
    assert np.array_equal(predict(strength="1"), plain)
    assert psnr(predict(strength="0"), photo) >= 40.0
    assert np.array_equal(predict(strength="0.5"), postprocess.blend(photo, plain, 0.5))

    job = server.client.post("/api/jobs", files={"image": ("a.png", png.getvalue(), "image/png")},
                             data={"style": STYLE, "faces": "false", "strength": "0.25"})
    assert job.status_code == 202, job.text
    assert server.wait_job(job.json()["id"])["status"] == "done"
    result = server.client.get(f"/api/jobs/{job.json()['id']}/result")
    painted = np.asarray(Image.open(io.BytesIO(result.content)).convert("RGB"))
    assert np.array_equal(painted, postprocess.blend(photo, plain, 0.25))

    for bad in ("1.5", "-1", "strong", "nan"):
        res = server.client.post("/api/jobs", files={"image": ("a.png", png.getvalue(), "image/png")},
                                 data={"strength": bad})
        assert res.status_code == 422, (bad, res.text)
        assert res.json()["detail"].startswith("strength:"), res.json()
