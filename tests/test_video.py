"""`anipaint convert clip.mp4 out.mp4`: every frame painted, frame rate and audio kept."""

from __future__ import annotations

import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

av = pytest.importorskip("av")


def _make_clip(path, photo: np.ndarray, frames: int = 6, fps: int = 12) -> None:
    """A short pan across a real photo, with a 440 Hz tone as the sound track."""
    with av.open(str(path), mode="w") as out:
        v = out.add_stream("libx264", rate=fps)
        v.width, v.height, v.pix_fmt = 160, 120, "yuv420p"
        a = out.add_stream("aac", rate=44100)
        a.layout = "mono"
        for i in range(frames):
            crop = np.ascontiguousarray(photo[40 + i * 10 : 160 + i * 10, 100 + i * 12 : 260 + i * 12])
            for p in v.encode(av.VideoFrame.from_ndarray(crop, format="rgb24")):
                out.mux(p)
        t = np.arange(int(44100 * frames / fps)) / 44100
        tone = (0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
        for start in range(0, len(tone), 1024):
            chunk = tone[start : start + 1024]
            if len(chunk) < 1024:
                chunk = np.pad(chunk, (0, 1024 - len(chunk)))
            frame = av.AudioFrame.from_ndarray(chunk[None, :], format="fltp", layout="mono")
            frame.sample_rate = 44100
            frame.pts = start
            for p in a.encode(frame):
                out.mux(p)
        for s in (v, a):
            for p in s.encode():
                out.mux(p)


def test_video_is_painted_frame_by_frame(prepared_store, tmp_path, astronaut):
    clip = tmp_path / "clip.mp4"
    _make_clip(clip, np.asarray(astronaut))
    out = tmp_path / "painted.mp4"
    proc = subprocess.run(
        [sys.executable, "-m", "anipaint.cli", "convert", str(clip), str(out), "--style", "v3-cute"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "6 frames" in proc.stdout
    with av.open(str(clip)) as src, av.open(str(out)) as dst:
        assert dst.streams.video[0].average_rate == Fraction(12, 1)
        assert len(dst.streams.audio) == 1
        src_frames = [f.to_ndarray(format="rgb24").astype(np.float64) for f in src.decode(video=0)]
        dst_frames = [f.to_ndarray(format="rgb24").astype(np.float64) for f in dst.decode(video=0)]
    assert len(dst_frames) == len(src_frames) == 6
    assert dst_frames[0].shape == (120, 160, 3)
    for a, b in zip(src_frames, dst_frames, strict=True):
        assert np.abs(a - b).mean() > 5  # every frame restyled
    # consecutive frames of a slow pan stay alike: nothing shuffled or dropped
    assert np.abs(dst_frames[0] - dst_frames[1]).mean() < np.abs(dst_frames[0] - dst_frames[5]).mean()


def test_not_a_video_is_a_clear_error(prepared_store, tmp_path):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"no video here")
    proc = subprocess.run(
        [sys.executable, "-m", "anipaint.cli", "convert", str(bad), str(tmp_path / "o.mp4"), "--style", "v3-cute"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "not a video" in proc.stderr and "Traceback" not in proc.stderr
