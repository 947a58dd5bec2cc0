"""``anipaint convert --watch IN OUT`` as a user runs it: a real watcher process, real photos arriving while it runs
(copied in slowly, renamed in, in a subfolder, one broken), Ctrl-C, and a restart that repaints only what changed.

Waits are bounded but generous (each start imports torch and loads a model); nothing asserts how long a step took.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import av
import numpy as np
import pytest
import skimage.data
from PIL import Image

from anipaint.cli.watch import MANIFEST, watch_folder
from support.paths import GROUP_PHOTO

START_TIMEOUT = 300  # torch import, model load and the first paint, on two cores shared with other work
STEP_TIMEOUT = 120


class Watcher:
    """One ``anipaint convert --watch`` process, its stdout and stderr in files so they can be read while it runs."""

    def __init__(self, src: Path, dst: Path, logs: Path) -> None:
        logs.mkdir(parents=True, exist_ok=True)
        self.out_log, self.err_log = logs / "stdout.txt", logs / "stderr.txt"
        with self.out_log.open("w") as out, self.err_log.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "anipaint.cli", "convert", "--watch", str(src), str(dst),
                 "--style", "v3-cute", "--max-side", "128", "--no-faces"],
                stdout=out, stderr=err, text=True, env=os.environ.copy())

    @property
    def stdout(self) -> str:
        return self.out_log.read_text()

    @property
    def stderr(self) -> str:
        return self.err_log.read_text()

    def painted(self, name: str) -> int:
        """How many "src → dst" lines name the source file ``name`` (a path relative to the watched folder)."""
        return sum(line.split(" → ")[0].endswith("/" + name) for line in self.stdout.splitlines() if " → " in line)

    def wait_for(self, check, what: str, timeout: float = STEP_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if self.proc.poll() is not None:
                pytest.fail(f"the watcher exited ({self.proc.returncode}) before {what}:\n{self.stdout}\n{self.stderr}")
            if time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail(f"no {what} within {timeout} s:\n{self.stdout}\n{self.stderr}")
            time.sleep(0.2)

    def interrupt(self, sig: int = signal.SIGINT) -> int:
        """Ctrl-C, as a terminal sends it (or a service manager's SIGTERM)."""
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=STEP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail(f"the watcher did not stop on SIGINT:\n{self.stderr}")


def _png_bytes(photo: np.ndarray, path: Path) -> bytes:
    Image.fromarray(photo).save(path)
    return path.read_bytes()


def _write_clip(path: Path, frames: int = 6) -> None:
    """A few frames of a pan over a real photo, no sound."""
    photo = skimage.data.astronaut()
    with av.open(str(path), mode="w") as out:
        stream = out.add_stream("libx264", rate=12)
        stream.width, stream.height, stream.pix_fmt = 160, 96, "yuv420p"
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(photo[100:196, 60 + 8 * i : 220 + 8 * i]))
            out.mux(stream.encode(frame))
        out.mux(stream.encode())


def _assert_painted(out: Path, source_size: tuple[int, int]) -> None:
    """A whole PNG, long side 128, the source's aspect."""
    with Image.open(out) as img:
        img.load()
        assert img.format == "PNG" and max(img.size) == 128, (out, img.size)
        assert abs(img.width / img.height - source_size[0] / source_size[1]) < 0.03, (out, img.size, source_size)


SIZES = {"first.jpg": (900, 900), "slow.png": (512, 320), "moved.jpg": (451, 300), "sub/deep/c.png": (600, 400)}
OUTPUTS = {"first.jpg": "first.png", "slow.png": "slow.png", "moved.jpg": "moved.png",
           "sub/deep/c.png": "sub/deep/c.png"}


@pytest.fixture(scope="module")
def first_watch(prepared_store, tmp_path_factory) -> dict:  # noqa: ARG001 - the store the watcher paints with
    """One watcher run: a photo there at start, then four files arriving while it runs, then Ctrl-C."""
    root = tmp_path_factory.mktemp("watch")
    src, dst = root / "in", root / "out"
    src.mkdir()
    shutil.copy(GROUP_PHOTO, src / "first.jpg")
    watcher = Watcher(src, dst, root / "run1")
    watcher.wait_for(lambda: watcher.painted("first.jpg"), "painting of the photo present at start", START_TIMEOUT)

    (src / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a whole jpeg " + os.urandom(2000))
    (src / "sub" / "deep").mkdir(parents=True)
    Image.fromarray(skimage.data.coffee()).save(src / "sub" / "deep" / "c.png")
    # A download: written under a temporary hidden name, then renamed into place in one step.
    Image.fromarray(skimage.data.chelsea()).save(src / ".moved.jpg.part", format="JPEG", quality=90)
    os.rename(src / ".moved.jpg.part", src / "moved.jpg")
    # A video made elsewhere and moved in whole.
    _write_clip(root / "clip.mp4")
    os.replace(root / "clip.mp4", src / "clip.mp4")
    # A slow copy: six chunks over about 1.5 s. The pauses are longer than the watcher's look at files settling
    # (0.2 s) and shorter than its settle time (1 s): a watcher that did not wait for quiet would paint half a PNG.
    data = _png_bytes(skimage.data.astronaut()[:320], root / "slow-source.png")
    with (src / "slow.png").open("wb") as f:
        for i in range(6):
            f.write(data[i * len(data) // 6 : (i + 1) * len(data) // 6])
            f.flush()
            time.sleep(0.25)

    watcher.wait_for(lambda: all(watcher.painted(name) for name in [*OUTPUTS, "clip.mp4"])
                     and "broken.jpg" in watcher.stderr, "painting of the five files and the broken one's line")
    time.sleep(2.5)  # a second paint of any of them, if one were coming, would come within the settle time
    code = watcher.interrupt()
    return {"src": src, "dst": dst, "watcher": watcher, "code": code}


def test_watch_paints_what_arrives_once_skips_a_broken_file_and_stops_on_ctrl_c(first_watch):
    watcher, dst = first_watch["watcher"], first_watch["dst"]
    stdout, stderr = watcher.stdout, watcher.stderr
    assert first_watch["code"] == 0, stderr
    assert "Traceback" not in stderr, stderr
    assert f"watching {first_watch['src']} for new pictures and videos (Ctrl-C to stop)" in stderr
    assert "watching stopped: 5 painted, 1 skipped" in stderr, stderr
    for name, out in OUTPUTS.items():
        assert watcher.painted(name) == 1, (name, stdout)  # once, and only when complete: no earlier attempt
        _assert_painted(dst / out, SIZES[name])
    assert watcher.painted("clip.mp4") == 1
    with av.open(str(dst / "clip.mp4")) as clip:
        frames = [f.to_ndarray(format="rgb24") for f in clip.decode(video=0)]
    assert len(frames) == 6 and frames[0].shape[1] / frames[0].shape[0] == pytest.approx(160 / 96, abs=0.05)
    skipped = [line for line in stderr.splitlines() if line.startswith("skipped: ")]
    assert len(skipped) == 1 and skipped[0].startswith(f"skipped: {first_watch['src'] / 'broken.jpg'}: "), stderr
    assert not (dst / "broken.png").exists()
    assert not [p for p in dst.rglob("*") if p.name.startswith(".moved")], "a temporary file was painted"
    manifest = json.loads((dst / MANIFEST).read_text())["files"]
    assert set(manifest) == {*OUTPUTS, "clip.mp4", "broken.jpg"}
    assert manifest["broken.jpg"]["error"] and manifest["broken.jpg"]["output"] is None


def test_restart_repaints_only_files_whose_content_changed(first_watch, tmp_path):
    src, dst = first_watch["src"], first_watch["dst"]
    before = {name: (dst / out).stat().st_mtime_ns for name, out in {**OUTPUTS, "clip.mp4": "clip.mp4"}.items()}
    later = time.time() + 5
    os.utime(src / "first.jpg", (later, later))  # touched while nobody watched: same content
    Image.fromarray(skimage.data.chelsea()[::-1]).save(src / "moved.jpg", format="JPEG", quality=90)  # changed

    watcher = Watcher(src, dst, tmp_path / "run2")
    watcher.wait_for(lambda: "(Ctrl-C to stop)" in watcher.stderr, "the watching line", START_TIMEOUT)
    os.utime(src / "slow.png", (later, later))  # touched while watched
    time.sleep(0.3)
    Image.fromarray(skimage.data.coffee()[:, ::-1]).save(src / "sub" / "deep" / "c.png")  # changed while watched
    watcher.wait_for(lambda: watcher.painted("moved.jpg") and watcher.painted("sub/deep/c.png"),
                     "repainting of the two changed files", START_TIMEOUT)
    time.sleep(2.5)  # the touched ones were queued first; any repaint of them would have come by now
    code = watcher.interrupt(signal.SIGTERM)  # stops as cleanly as Ctrl-C

    stderr = watcher.stderr
    assert code == 0 and "Traceback" not in stderr, stderr
    assert sum(" → " in line for line in watcher.stdout.splitlines()) == 2, watcher.stdout
    assert "watching stopped: 2 painted, 0 skipped" in stderr, stderr
    assert "broken.jpg" not in stderr  # known broken and unchanged: not tried again
    for name, out in (("first.jpg", "first.png"), ("slow.png", "slow.png"), ("clip.mp4", "clip.mp4")):
        assert (dst / out).stat().st_mtime_ns == before[name], name
    for name in ("moved.jpg", "sub/deep/c.png"):
        assert (dst / OUTPUTS[name]).stat().st_mtime_ns != before[name], name
        _assert_painted(dst / OUTPUTS[name], SIZES[name])


def test_an_interrupted_paint_leaves_no_half_output(tmp_path, capsys):
    """Ctrl-C in the middle of a paint: what that paint wrote is removed, and it is not recorded as painted."""
    src, dst = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    (src / "a.jpg").write_bytes(b"a picture")
    (dst / "keep.png").parent.mkdir()
    (dst / "keep.png").write_bytes(b"painted before")

    def convert(path: Path, folder: Path) -> Path:
        (folder / "a.png").write_bytes(b"half a pict")
        raise KeyboardInterrupt

    assert watch_folder(src, dst, convert, wanted=lambda p: True, settle=0.1) == 0
    assert sorted(p.name for p in dst.iterdir()) == ["keep.png"]  # no manifest entry was written either
    assert "watching stopped: 0 painted, 0 skipped" in capsys.readouterr().err


def test_stop_ends_a_watch_in_another_thread_and_its_own_output_is_not_watched(tmp_path):
    """Embedded: a thread watches until ``stop`` is set. The output folder lies inside the watched one, and neither
    its paintings nor temporary or hidden files are taken for new arrivals."""
    src = tmp_path / "in"
    dst = src / "painted"
    src.mkdir()
    (src / "a.jpg").write_bytes(b"a picture")
    done: list[str] = []

    def convert(path: Path, folder: Path) -> Path:
        out = folder / (path.stem + ".png")
        out.write_bytes(b"painted")
        done.append(path.name)
        return out

    stop, codes = threading.Event(), []
    thread = threading.Thread(target=lambda: codes.append(watch_folder(
        src, dst, convert, wanted=lambda p: p.suffix in (".jpg", ".png"), settle=0.1, stop=stop)))
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while "a.jpg" not in done and time.monotonic() < deadline:
            time.sleep(0.05)
        for name in ("b.jpg.part", "~c.jpg", "c.jpg~", ".d.jpg", "e.jpg"):
            (src / name).write_bytes(b"another picture")
        while "e.jpg" not in done and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # room for a wrong second paint
    finally:
        stop.set()
        thread.join(timeout=30)
    assert codes == [0] and done == ["a.jpg", "e.jpg"]
