"""``anipaint models prepare`` and the server's background warm-up show their own steps and one line per
style, not the libraries' warnings, glog lines and exporter prints; ``-v`` lets those through.

Each run starts from a fresh home. Compiling is left out (the session's v3-cute builds are copied in), but one
real export is done each time: v3-cute's ONNX build through the dynamo exporter (its ``[torch.onnx]`` prints,
"torchvision is not installed" W-lines, FutureWarnings), or v2-hayao's through the TorchScript exporter
(TracerWarnings, constant-folding UserWarnings).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from support.builds import seed_builds
from support.service import running_server

NOISE = re.compile(r"torchvision|Warning|\[torch\.onnx\]|^[IWEF]\d{4} \d\d:\d\d:\d\d", re.MULTILINE)
ENGINE_LINE = re.compile(r"^  v3-cute +(torch|compiled|int8|onnxruntime) \(built in \d+\.\d s, measured in \d+\.\d s, "
                         r"(PSNR \d+(\.\d+)? dB|PSNR ∞ \(the reference's pictures\)|the reference itself)\)$",
                         re.MULTILINE)
pytestmark = pytest.mark.timeout(600)


def _noise(*texts: str) -> list[str]:
    return NOISE.findall("\n".join(texts).replace("\r", "\n"))


def _prepare(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "anipaint.cli", "models", "prepare", *args], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "ANIPAINT_HOME": str(home), **env})


@pytest.fixture(scope="module")
def v3_cute_built(engine_builds) -> dict:
    """v3-cute built in the session store (compiled once per run, in the fixture's time, not the test's)."""
    return engine_builds("v3-cute")


def _seed_v3_cute_but_its_onnx(home: Path) -> None:
    """v3-cute's builds in ``home`` but its ONNX one: a preparation there exports that (~10 s) and measures."""
    for path in seed_builds("v3-cute", home):
        if path.suffix == ".onnx":
            path.unlink()


def test_quiet_holds_the_libraries_back_and_verbose_lets_them_through(capsys, caplog) -> None:
    from anipaint.engine.runtime import progress

    source = logging.getLogger("torch.onnx._internal.exporter._registration")
    passed: list[logging.LogRecord] = []  # what gets past the torch loggers' levels
    keep = logging.Handler()
    keep.emit = passed.append  # type: ignore[method-assign]
    levels = {name: logging.getLogger(name).level for name in progress.LIBRARY_LOGGERS}

    def chatter() -> None:
        warnings.warn("a library's warning", FutureWarning, stacklevel=1)
        source.warning("torchvision is not installed")
        print("[torch.onnx] Run decompositions...")

    source.addHandler(keep)
    try:
        with caplog.at_level(logging.DEBUG, logger="anipaint.engine.runtime.progress"), \
                warnings.catch_warnings(record=True) as shown:
            warnings.simplefilter("always")
            with progress.quiet(), progress.quiet():  # nested: one silence
                chatter()
            assert not shown and not passed and capsys.readouterr().out == ""
            assert {name: logging.getLogger(name).level for name in progress.LIBRARY_LOGGERS} == levels  # restored
            held = [r.getMessage() for r in caplog.records if r.name == "anipaint.engine.runtime.progress"]
            assert any("FutureWarning: a library's warning" in m for m in held), held
            assert "stdout: [torch.onnx] Run decompositions..." in held
            progress.verbose(True)
            try:
                with progress.quiet():
                    chatter()
            finally:
                progress.verbose(False)
            assert [str(w.message) for w in shown] == ["a library's warning"]
            assert [r.getMessage() for r in passed] == ["torchvision is not installed"]
            assert "[torch.onnx]" in capsys.readouterr().out
    finally:
        source.removeHandler(keep)


def test_prepare_shows_its_steps_and_one_line_per_style(tmp_path, v3_cute_built) -> None:
    home = tmp_path / "home"
    _seed_v3_cute_but_its_onnx(home)
    started = time.monotonic()
    proc = _prepare(home, "v3-cute")
    seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not _noise(proc.stdout, proc.stderr), proc.stdout + proc.stderr
    line = ENGINE_LINE.search(proc.stdout)
    assert line, proc.stdout
    [record] = (home / "models" / "v3-cute" / "engine").glob("auto-*.json")
    assert line[1] == json.loads(record.read_text())["choice"]
    bar = proc.stderr.replace("\r", "\n")  # one progress bar, redrawn at each step
    for step in ("v3-cute: converting", "v3-cute: opening compiled", "v3-cute: building onnxruntime",
                 "v3-cute: measuring", "prepared"):
        assert step in bar, bar
    print(f"prepare v3-cute (convert, ONNX export, measure): {seconds:.1f} s\n{proc.stdout}")


def test_verbose_shows_the_exporters_noise(own_build_home, sources) -> None:
    """v2-hayao's ONNX build alone (named in the settings): quiet, then again with ``-v``, noisy."""
    home, onnx = own_build_home, {"ANIPAINT_BACKEND": "onnxruntime"}
    proc = _prepare(home, "v2-hayao", **onnx)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not _noise(proc.stdout, proc.stderr), proc.stdout + proc.stderr
    assert re.search(r"^  v2-hayao +onnxruntime \(built in \d+\.\d s, named, not measured\)$", proc.stdout, re.M)
    for build in (home / "models" / "v2-hayao" / "engine").glob("onnxruntime-*.onnx"):
        build.unlink()
    proc = _prepare(home, "v2-hayao", "-v", **onnx)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "TracerWarning" in proc.stderr, proc.stderr


def test_the_server_log_gets_one_line_per_style_and_no_library_noise(tmp_path, sources, v3_cute_built) -> None:
    """The background warm-up (a child process) exports v3-cute's ONNX build and measures; the server's log
    says when the engine is ready, and nothing of what torch said on the way."""
    src = tmp_path / "sources" / "animeganv3"
    src.mkdir(parents=True)
    shutil.copy(sources / "animeganv3" / "AnimeGANv3_tiny_Cute.onnx", src)
    home = tmp_path / "home"
    _seed_v3_cute_but_its_onnx(home)
    with running_server(tmp_path, home=home, sources=src.parent, default_style="v3-cute", background="all",
                        background_nice=0, faces=0, log_level="info") as server:
        deadline = time.monotonic() + 300
        while "v3-cute engine ready" not in server.log_tail(200):
            assert server.proc.poll() is None and time.monotonic() < deadline, server.log_tail()
            time.sleep(1)
    log = server.log_path.read_text()
    assert not _noise(log), log
    [ready] = [line for line in log.splitlines() if "engine ready" in line]
    [record] = (home / "models" / "v3-cute" / "engine").glob("auto-*.json")
    choice = json.loads(record.read_text())["choice"]
    assert re.search(rf"v3-cute engine ready: {choice} \(built in .* s, .*\); v3-cute now paints with {choice}$",
                     ready), ready


def test_a_failed_build_keeps_its_reason_in_the_styles_line() -> None:
    from anipaint.engine.runtime.progress import summary

    record = {"choice": "compiled", "build_seconds": 41.26, "measure_seconds": 6.2,
              "results": {"torch": {"seconds": 1.0, "reference": True, "faithful": True},
                          "compiled": {"seconds": 0.5, "psnr": 48.12, "faithful": True},
                          "onnxruntime": {"error": "RuntimeError: no space left on device\n  more of it"}}}
    assert summary(record) == ("compiled (built in 41.3 s, measured in 6.2 s, PSNR 48.12 dB, "
                               "failed: onnxruntime (RuntimeError: no space left on device))")
    assert summary({**record, "choice": "torch"}).startswith("torch (built in 41.3 s, measured in 6.2 s, the reference")
    assert summary({"choice": "torch"}) == "torch (the one engine for this style)"
