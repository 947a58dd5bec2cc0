"""Portrait mode over HTTP against the real server: ``portrait`` and ``background`` on /predict and /api/jobs, and
``faces_found`` in the answers. (The pipeline's own measures are in test_portrait.py.)"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import skimage.data
from PIL import Image

from anipaint.faces import blend, get_face_detector
from anipaint.models import helpers
from anipaint.settings import get_settings
from support.paths import GROUP_PHOTO
from support.service import jpeg, running_server

pytestmark = pytest.mark.skipif(not GROUP_PHOTO.is_file(), reason="sample photo missing")
STYLE = "v3-cute"  # the fastest style


@pytest.fixture(scope="module")
def server(prepared_store, tmp_path_factory):
    with running_server(tmp_path_factory.mktemp("portrait-api")) as s:
        yield s


@pytest.fixture(scope="module")
def group() -> bytes:
    return GROUP_PHOTO.read_bytes()


def predict(server, photo: bytes, **fields: str) -> tuple[np.ndarray, dict]:
    res = server.client.post("/predict", files={"image": ("p.jpg", photo, "image/jpeg")},
                             data={"style": STYLE, "faces": "false", **fields})
    assert res.status_code == 200, res.text
    body = res.json()
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(body["result"]))).convert("RGB")), body


def test_predict_portrait_restyles_the_faces_of_a_group(server, group, prepared_store) -> None:
    plain, body = predict(server, group)
    assert body["faces_found"] == 0  # the face pass was off
    portrait, body = predict(server, group, portrait="true")
    assert body["faces_found"] >= 2, body
    photo = np.asarray(Image.open(io.BytesIO(group)).convert("RGB"))
    settings = get_settings()
    faces = get_face_detector(settings, helpers.install_face_detector(settings)).detect(photo)
    assert len(faces) == body["faces_found"]
    diff = np.abs(portrait.astype(np.float32) - plain).mean(axis=2)
    for face in faces:
        inside = blend.face_mask(face, photo.shape, plain.shape) > 0.95
        assert diff[inside].mean() >= 12, diff[inside].mean()  # the faces are the face model's, not the style's


def test_job_portrait_with_a_background_style(server, group) -> None:
    res = server.submit(group, style=STYLE, faces="false", portrait="true", background="v3-shinkai")
    assert res.status_code == 202, res.text
    assert res.json()["faces_found"] is None  # not known before the paint
    info = server.wait_job(res.json()["id"], timeout=300)
    assert info["status"] == "done", info
    assert info["faces_found"] >= 2, info
    painted = server.client.get(f"/api/jobs/{info['id']}/result")
    assert painted.status_code == 200
    plain, _ = predict(server, group, portrait="true")
    with_background = np.asarray(Image.open(io.BytesIO(painted.content)).convert("RGB"))
    assert np.abs(with_background.astype(np.float32) - plain).mean() >= 4  # the background is another style


def test_no_face_answers_zero(server) -> None:
    coffee = jpeg(Image.fromarray(skimage.data.coffee()))
    _, body = predict(server, coffee, portrait="true")
    assert body["faces_found"] == 0
    res = server.submit(coffee, style=STYLE, portrait="true")
    info = server.wait_job(res.json()["id"], timeout=300)
    assert info["status"] == "done" and info["faces_found"] == 0, info


@pytest.mark.parametrize("path", ["/predict", "/api/jobs"])
@pytest.mark.parametrize(("background", "status", "reason"), [
    ("v3-jp-face", 400, "paints face crops only"),
    ("no-such-style", 400, "for background"),  # an unknown style is 400 in every style field
])
def test_bad_background_is_a_clear_error(server, group, path, background, status, reason) -> None:
    res = server.client.post(path, files={"image": ("p.jpg", group, "image/jpeg")},
                             data={"style": STYLE, "portrait": "true", "background": background})
    assert res.status_code == status, res.text
    assert reason in res.json()["detail"], res.json()
