"""A style whose files cannot be downloaded, as a user meets it: the CLI says so in one line and remembers it,
`anipaint styles` says when the next try is, and no paint waits without a bound on a download another process
holds (the server's background warm-up among them).

The mirror is a local http.server (no internet) serving the real sources, or failing, or stalling, as a test
asks; the home and the sources folder start empty.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from anipaint.errors import DownloadError
from anipaint.models.registry import get_style
from anipaint.settings import Settings
from support.mirror import serving
from support.paths import GROUP_PHOTO

V1 = "v1-paprika"  # two files (model.json + weights shard), converts in seconds
pytestmark = pytest.mark.timeout(300)


def run_cli(*args: str, home: Path, mirror: str, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "ANIPAINT_HOME": str(home), "ANIPAINT_SOURCES": str(home.parent / "no-sources"),
               "ANIPAINT_MIRROR": mirror, "ANIPAINT_OFFLINE": "0", **env}
    return subprocess.run([sys.executable, "-m", "anipaint.cli", *args], capture_output=True, text=True,
                          env=environ, timeout=600)


def _styles_line(home: Path, mirror: str, style: str) -> str:
    proc = run_cli("styles", home=home, mirror=mirror)
    assert proc.returncode == 0, proc.stderr
    return next(line for line in proc.stdout.splitlines() if line.startswith(style + " "))


def test_a_failed_download_is_said_remembered_and_tried_again_by_fetch(tmp_path: Path, sources: Path) -> None:
    home = tmp_path / "home"
    out = tmp_path / "out.png"
    paint = ("convert", str(GROUP_PHOTO), str(out), "--style", V1, "--max-side", "64", "--no-faces")
    with serving(sources) as mirror:
        assert "download on first use" in _styles_line(home, mirror.url, V1)
        mirror.failing = 503
        proc = run_cli(*paint, home=home, mirror=mirror.url)
        assert proc.returncode != 0 and not out.exists()
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("anipaint: error: "), proc.stderr
        assert V1 in lines[0] and "HTTP 503" in lines[0] and "anipaint models fetch" in lines[0], lines[0]
        tried = len(mirror.requests)
        assert tried >= 1

        line = _styles_line(home, mirror.url, V1)
        assert "download failed: HTTP 503" in line and "retry at" in line, line
        assert "converting" not in line.split("(")[0], line

        again = run_cli(*paint, home=home, mirror=mirror.url)  # before the retry time: no new try, the same sentence
        assert again.returncode != 0 and "retry" in again.stderr and len(mirror.requests) == tried, again.stderr

        mirror.failing = None
        fetched = run_cli("models", "fetch", V1, home=home, mirror=mirror.url)  # asked for: tried at once
        assert fetched.returncode == 0, fetched.stderr
        assert "download failed" not in _styles_line(home, mirror.url, V1)
        proc = run_cli(*paint, home=home, mirror=mirror.url)
        assert proc.returncode == 0, proc.stderr
        assert out.exists()


def _settings(tmp_path: Path, mirror: str, **more: object) -> Settings:
    (tmp_path / "no-sources").mkdir(exist_ok=True)
    return dataclasses.replace(Settings(), home=tmp_path / "home", sources=tmp_path / "no-sources", mirror=mirror,
                               offline=False, auto_fetch=True, **more)


def _paint_in_thread(settings: Settings, style: str) -> tuple[threading.Thread, dict]:
    """A server's paint of ``style`` (marked as painting, as its job runner does) in a thread of its own."""
    from anipaint.painter import Painter
    from anipaint.warmup import painting

    outcome: dict = {}

    def paint() -> None:
        try:
            with painting():
                outcome["image"] = Painter(get_style(style), settings).paint(GROUP_PHOTO, max_side=64, faces=False)
        except Exception as exc:  # noqa: BLE001 - the test reads it
            outcome["error"] = exc

    thread = threading.Thread(target=paint, daemon=True)
    thread.start()
    return thread, outcome


def test_a_paint_never_waits_on_the_background_warmups_download(tmp_path: Path, sources: Path) -> None:
    """The warm-up's convert step fails (the origin answers 503); its next step, building the fast engine, must
    not go and download the files itself. It used to, and a paint that started meanwhile stopped the warm-up
    (SIGSTOP, as for every engine build) while it held the download's lock: the paint waited for that lock, and
    the warm-up for the paint to end."""
    from anipaint.warmup import Warmup

    with serving(sources) as mirror:
        mirror.script = [503, "stall"]  # the convert step's try fails; a second try would hang until released
        settings = _settings(tmp_path, mirror.url, background="all", default_style="v3-cute")
        warm = Warmup(settings)
        warm.start(steps=[("convert", V1), ("optimise", V1)])  # what plan() gives this style, alone
        try:
            deadline = time.monotonic() + 120
            while warm.current != ("optimise", V1) and ("optimise", V1) in warm.steps:
                assert time.monotonic() < deadline, (warm.current, warm.steps)
                time.sleep(0.05)
            time.sleep(1.0)  # the step under way: a download would be waiting on the stalled mirror by now
            thread, outcome = _paint_in_thread(settings, V1)
            mirror.gate.set()  # too late for a stopped warm-up: its connection is never read again
            thread.join(90)
            assert not thread.is_alive(), "the paint is still waiting for the download lock"
            assert isinstance(outcome.get("error"), DownloadError), outcome  # within the retry time: not tried
            assert len(mirror.requests) == 1, mirror.requests  # only the convert step's try
        finally:
            warm.stop()


def test_a_download_another_process_holds_without_progress_is_given_up(tmp_path: Path, sources: Path) -> None:
    """Another process holds the file's download lock and transfers nothing: the paint gives up after the
    download timeout with a sentence, instead of waiting as long as that process lives."""
    settings = _settings(tmp_path, "http://127.0.0.1:9/unused", download_timeout=3.0)
    first = get_style(V1).sources[0]
    lock = settings.home / "downloads" / Path(first.path).parent / ".locks" / f"{Path(first.path).name}.lock"
    lock.parent.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from filelock import FileLock; "
                               f"held = FileLock({str(lock)!r}); held.acquire(); print('held', flush=True); "
                               "time.sleep(600)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        thread, outcome = _paint_in_thread(settings, V1)
        thread.join(60)
        assert not thread.is_alive(), "the paint is still waiting for another process's download"
        error = outcome.get("error")
        assert isinstance(error, DownloadError) and "another process" in str(error), outcome
    finally:
        holder.kill()
        holder.wait(10)
