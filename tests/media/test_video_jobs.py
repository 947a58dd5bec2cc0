"""Videos and animated pictures through the HTTP API (the embedded queue; tests/service/test_scaleout.py has the Celery
workers): a real clip with sound in, progress counted in frames with an ETA, an MP4 with its sound (or the
animated picture) out, and the limits answered 413 with the limit in the reason."""

from __future__ import annotations

import io
import time

import numpy as np
import pytest
from PIL import Image

from anipaint.settings import get_settings
from support.service import in_process_server, photo_bytes

av = pytest.importorskip("av")
SAMPLES = get_settings().samples_dir
CLIP = SAMPLES / "realshort.mp4"  # 320×240, 36 frames at 29.97 fps, 1.2 s, H.264 + AAC
GIF = SAMPLES / "newtonscradle.gif"


@pytest.fixture(scope="module")
def server(prepared_store, tmp_path_factory):
    with in_process_server(tmp_path_factory.mktemp("video-jobs")) as s:
        yield s


def _clip(seconds: float, size: tuple[int, int]) -> bytes:
    """A short clip cut from the real one, at ``size`` (W, H)."""
    out = io.BytesIO()
    with av.open(str(CLIP)) as src, av.open(out, mode="w", format="mp4") as dst:
        v = dst.add_stream("libx264", rate=30)
        v.width, v.height, v.pix_fmt = *size, "yuv420p"
        for i, frame in enumerate(src.decode(video=0)):
            if i >= seconds * 30:
                break
            picture = frame.to_image().resize(size)
            for p in v.encode(av.VideoFrame.from_image(picture)):
                dst.mux(p)
        for p in v.encode():
            dst.mux(p)
    return out.getvalue()


def _follow(server, job_id: str, timeout: float = 300) -> tuple[dict, list[dict]]:
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = server.client.get(f"/api/jobs/{job_id}").json()
        seen.append(info)
        if info["status"] in ("done", "failed"):
            return info, seen
        time.sleep(0.05)
    raise TimeoutError(job_id)


def test_a_video_job_comes_back_as_an_mp4_with_its_sound(server, tmp_path):
    res = server.client.post("/api/jobs", files={"image": ("clip.mp4", CLIP.read_bytes(), "video/mp4")},
                             data={"max_side": "256"})
    assert res.status_code == 202, res.text
    info, seen = _follow(server, res.json()["id"])
    assert info["status"] == "done", info
    assert info["media_type"] == "video/mp4" and info["frames"] == info["frame"] == 36
    assert (info["width"], info["height"]) == (256, 192)
    counted = [s["frame"] for s in seen if s["status"] == "running" and s["frame"]]
    assert counted and counted == sorted(counted) and all(s["frames"] == 36 for s in seen if s["frame"])
    assert any(s["eta_seconds"] is not None for s in seen if s["status"] == "running")
    got = server.client.get(f"/api/jobs/{info['id']}/result")
    assert got.status_code == 200 and got.headers["content-type"] == "video/mp4"
    out = tmp_path / "painted.mp4"
    out.write_bytes(got.content)
    with av.open(str(CLIP)) as a, av.open(str(out)) as b:
        assert len(b.streams.audio) == 1 and b.streams.audio[0].codec_context.name == "aac"
        assert b.streams.video[0].average_rate == a.streams.video[0].average_rate
        sound_in = np.concatenate([f.to_ndarray().ravel() for f in a.decode(audio=0)])
        sound_out = np.concatenate([f.to_ndarray().ravel() for f in b.decode(audio=0)])
        assert abs(len(sound_out) - len(sound_in)) < 2048 and np.abs(sound_out).max() > 0.01
    with av.open(str(out)) as b:
        frames = [f.to_ndarray(format="rgb24") for f in b.decode(video=0)]
    assert len(frames) == 36 and frames[0].shape == (192, 256, 3)


def test_an_animated_gif_job_comes_back_animated(server):
    res = server.client.post("/api/jobs", files={"image": ("cradle.gif", GIF.read_bytes(), "image/gif")})
    assert res.status_code == 202, res.text
    info, _ = _follow(server, res.json()["id"])
    assert info["status"] == "done" and info["media_type"] == "image/gif" and info["frames"] == 36, info
    got = server.client.get(f"/api/jobs/{info['id']}/result")
    assert got.headers["content-type"] == "image/gif"
    with Image.open(io.BytesIO(got.content)) as img:
        assert img.n_frames == 36 and img.size == (200, 150)


def test_clips_are_for_jobs_and_pictures_only_options_are_refused(server):
    res = server.client.post("/predict", files={"image": ("clip.mp4", CLIP.read_bytes(), "video/mp4")})
    assert res.status_code == 415 and "/api/jobs" in res.json()["detail"]
    res = server.client.post("/api/jobs", files={"image": ("clip.mp4", CLIP.read_bytes(), "video/mp4")},
                             data={"portrait": "true"})
    assert res.status_code == 422 and "not videos" in res.json()["detail"]
    broken = CLIP.read_bytes()[:3000]  # the header says MP4, the rest is gone
    res = server.client.post("/api/jobs", files={"image": ("cut.mp4", broken, "video/mp4")})
    assert res.status_code == 415, res.text
    assert "video" in res.json()["detail"]
    # a picture is still a picture
    assert server.client.post("/api/jobs", files={"image": ("p.jpg", photo_bytes(), "image/jpeg")}).status_code == 202


def test_over_a_video_limit_is_413_naming_the_limit(prepared_store, tmp_path):
    limits = {"video_max_seconds": 1.0, "video_max_pixels": 200 * 150, "video_max_bytes": 90_000}
    with in_process_server(tmp_path, **limits) as s:
        def post(data: bytes):
            return s.client.post("/api/jobs", files={"image": ("v.mp4", data, "video/mp4")})

        res = post(CLIP.read_bytes())  # 96 KB
        assert res.status_code == 413 and "88 KB limit for videos" in res.json()["detail"], res.text
        res = post(_clip(1.5, (160, 120)))
        assert res.status_code == 413 and "limit here is 1 s" in res.json()["detail"], res.text
        res = post(_clip(0.5, (320, 240)))
        assert res.status_code == 413 and "0.0 MP a frame" in res.json()["detail"], res.text
        res = post(_clip(0.5, (160, 120)))
        assert res.status_code == 202, res.text
