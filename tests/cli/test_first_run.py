"""First run on an empty store: the server paints in its default style before the background warm-up is
done, says what each style is doing, and moves the style onto its fast engine without a restart.

The sources folder holds two styles: a PyTorch-port AnimeGANv2 file (the default; ``auto`` measures its plain
and strip engines — the cheapest measurement there is) and v3 Cute (converted and built in the background).
Timings are not asserted here.
"""

from __future__ import annotations

import base64
import io
import json
import shutil
import time

import numpy as np
import pytest
from PIL import Image

from anipaint.models import store
from anipaint.models.registry import get_style
from anipaint.settings import reload_settings
from support.builds import seed_builds
from support.service import photo_bytes, running_server

# Measuring the engines takes about a minute on a quiet 2-core machine, many times that on a busy one.
pytestmark = pytest.mark.timeout(2400)
DEFAULT = "v2-face-paint-512-v2"


def _styles(server) -> dict[str, dict]:
    res = server.client.get("/api/styles")
    assert res.status_code == 200, res.text
    return {st["id"]: st for st in res.json()}


def _paint(server) -> np.ndarray:
    res = server.client.post("/predict", files={"image": ("group.jpg", photo_bytes(), "image/jpeg")},
                             data={"max_side": "160", "faces": "false"})
    assert res.status_code == 200, res.text
    assert res.json()["style"] == DEFAULT
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(res.json()["result"]))).convert("RGB"), np.float64)


def test_the_page_paints_first_and_the_style_then_moves_to_its_fast_engine(tmp_path, sources, engine_builds,
                                                                           prepared_store):
    src = tmp_path / "sources"
    (src / "animegan2-pytorch").mkdir(parents=True)
    # A real port-format file: the converted v2 Hayao state dict under the port's key names.
    shutil.copy(store.artefact_path(get_style("v2-hayao"), reload_settings()),
                src / "animegan2-pytorch" / "face_paint_512_v2.pt")
    (src / "animeganv3").mkdir()
    shutil.copy(sources / "animeganv3" / "AnimeGANv3_tiny_Cute.onnx", src / "animeganv3")
    home = tmp_path / "home"
    engine_builds("v3-cute")
    seeded = {p: p.stat().st_mtime_ns for p in seed_builds("v3-cute", home)}  # measured and switched to, not compiled
    with running_server(tmp_path, home=home, sources=src, default_style=DEFAULT, background="all",
                        background_nice=0, faces=0) as server:
        first = _paint(server)  # as soon as /readyz says ready: the default style is converted, nothing built
        styles = _styles(server)
        assert styles[DEFAULT]["state"] == "optimising", styles[DEFAULT]
        assert styles[DEFAULT]["engine"] == "torch" and "plain engine" in styles[DEFAULT]["detail"]
        assert styles["v3-hayao"]["state"] == "unavailable" and "source missing" in styles["v3-hayao"]["detail"]
        assert server.client.get("/readyz").json()["styles"][DEFAULT] == "optimising"

        deadline = time.monotonic() + 2000
        while styles[DEFAULT]["state"] != "ready" or styles["v3-cute"]["state"] != "ready":
            assert time.monotonic() < deadline, (styles[DEFAULT], styles["v3-cute"], server.log_tail())
            assert styles[DEFAULT]["state"] in ("optimising", "ready")  # converted all along, so it paints
            time.sleep(2)
            styles = _styles(server)
        for style_id in (DEFAULT, "v3-cute"):
            [record] = (home / "models" / style_id / "engine").glob("auto-*.json")
            choice = json.loads(record.read_text())["choice"]
            assert styles[style_id]["engine"] == choice  # the live painter runs what auto chose, without a restart
        assert {p: p.stat().st_mtime_ns for p in seeded} == seeded
        again = _paint(server)
        assert server.client.get("/readyz").json()["styles"] == {DEFAULT: "ready", "v3-cute": "ready"}
    photo = np.asarray(Image.open(io.BytesIO(photo_bytes())).convert("RGB").resize((160, 160)), np.float64)
    assert np.abs(first - photo).mean() > 8  # painted, not passed through
    assert 10 * np.log10(255**2 / np.mean((first - again) ** 2)) > 30  # the fast engine paints the same picture
