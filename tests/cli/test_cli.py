"""The `anipaint` command as a user runs it: real files, real models, exit codes and messages."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from support.builds import seed_builds
from support.paths import GROUP_PHOTO


def run_cli(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "anipaint.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def test_convert_one_photo_with_the_hayao_alias(prepared_store, tmp_path):
    out = tmp_path / "out.png"
    proc = run_cli("convert", str(GROUP_PHOTO), str(out), "--style", "hayao", "--no-faces")
    assert proc.returncode == 0, proc.stderr
    img = Image.open(out)
    assert img.size == (512, 512)
    src = np.asarray(Image.open(GROUP_PHOTO).convert("RGB").resize((512, 512)), np.float64)
    assert np.abs(np.asarray(img.convert("RGB"), np.float64) - src).mean() > 8  # it was restyled
    assert "v3-hayao" in proc.stdout  # the alias means v3-hayao on every machine


def test_convert_at_full_resolution_shows_progress(prepared_store, tmp_path):
    """A 1.1 MP photo at its own size (over four 512² tiles' worth): painted exactly in strips, with a progress bar
    on stderr."""
    big, out = tmp_path / "big.jpg", tmp_path / "big.png"
    Image.open(GROUP_PHOTO).convert("RGB").resize((1200, 900)).save(big, quality=92)
    proc = run_cli("convert", str(big), str(out), "--style", "v2-hayao", "--max-side", "original", "--no-faces")
    assert proc.returncode == 0, proc.stderr
    img = Image.open(out)
    assert img.size == (1200, 900)
    src = np.asarray(Image.open(big).convert("RGB"), np.float64)
    assert np.abs(np.asarray(img.convert("RGB"), np.float64) - src).mean() > 8
    assert "painting (v2-hayao)" in proc.stderr and "100%" in proc.stderr, proc.stderr[-500:]


def test_full_resolution_without_scratch_space_is_a_clear_error(prepared_store, tmp_path):
    big = tmp_path / "big.jpg"
    Image.open(GROUP_PHOTO).convert("RGB").resize((1400, 1050)).save(big, quality=92)
    proc = run_cli("convert", str(big), str(tmp_path / "out.png"), "--style", "v2-hayao", "--max-side", "original",
                   "--no-faces", env={"ANIPAINT_SCRATCH_DIR": str(tmp_path / "missing")})
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "ANIPAINT_SCRATCH_DIR" in proc.stderr and "ANIPAINT_LARGE_MODE=tiles" in proc.stderr


def test_convert_folder_reports_and_skips_a_corrupt_file(prepared_store, tmp_path):
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    shutil.copy(GROUP_PHOTO, src / "a.jpg")
    Image.open(GROUP_PHOTO).resize((200, 200)).save(src / "sub" / "b.png")
    (src / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 definitely not a whole jpeg")
    dst = tmp_path / "out"
    proc = run_cli("convert", str(src), str(dst), "--style", "v3-cute", "--max-side", "256", "--no-faces")
    assert proc.returncode == 1
    assert (dst / "a.png").is_file() and (dst / "sub" / "b.png").is_file()
    assert not (dst / "broken.png").exists()
    assert "2 of 3 files painted" in proc.stderr
    assert "broken.jpg" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert Image.open(dst / "a.png").size == (256, 256)


def test_clear_errors_and_nonzero_exit(prepared_store, tmp_path):
    proc = run_cli("convert", str(tmp_path / "nope.jpg"), str(tmp_path / "o.png"))
    assert proc.returncode == 2 and "no such file" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("convert", str(GROUP_PHOTO), str(tmp_path / "o.png"), "--style", "van-gogh")
    assert proc.returncode == 2 and "unknown style" in proc.stderr and "Traceback" not in proc.stderr
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"nope")
    proc = run_cli("convert", str(bad), str(tmp_path / "o.png"), "--style", "v3-cute")
    assert proc.returncode == 2 and "not an image" in proc.stderr
    proc = run_cli("convert", str(GROUP_PHOTO), str(tmp_path / "o.png"), "--max-side", "huge")
    assert proc.returncode == 2 and "max-side" in proc.stderr


def test_a_wrong_argument_is_refused_before_the_painter_loads(prepared_store, tmp_path):
    """A missing file, an unknown style or a file that is no picture is answered without loading the painter
    (and torch, which takes seconds): the process that refused never imported them."""
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"nope")
    for args in ([str(tmp_path / "nope.jpg"), "o.png"], [str(GROUP_PHOTO), "o.png", "--style", "van-gogh"],
                 [str(bad), "o.png"]):
        probe = (f"import sys; from anipaint.cli.main import main; rc = main(['convert', *{args!r}]); "
                 "print(rc, 'torch' in sys.modules, 'anipaint.painter' in sys.modules)")
        proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=60)
        assert proc.stdout.split() == ["2", "False", "False"], (args, proc.stdout, proc.stderr)
        assert proc.stderr.startswith("anipaint: error: ") and proc.stderr.count("\n") == 1, proc.stderr


def test_styles_lists_availability_with_reasons(prepared_store, tmp_path):
    proc = run_cli("styles")
    assert proc.returncode == 0
    states = {line.split()[0]: line.split()[1] for line in proc.stdout.strip().splitlines()}
    # converted but not yet measured for a fast engine: it paints now, on the plain network
    assert states["v2-hayao"] in ("optimising", "ready") and "plain engine" in proc.stdout
    assert "v2-face-paint-512-v2" in proc.stdout and "unavailable" in proc.stdout
    empty = tmp_path / "empty-sources"
    empty.mkdir()
    proc = run_cli("--sources", str(empty), "--home", str(tmp_path / "home"), "styles")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("unavailable") == len(proc.stdout.strip().splitlines())
    assert "source missing" in proc.stdout


def test_readme_first_run_path(tmp_path, engine_builds):
    """Preparing a style up front, then converting with it. The store starts
    empty but for this run's v2 builds (compiling is checked once, by whoever asked engine_builds first): prepare
    converts, finds the builds, measures them, and convert paints on what it chose."""
    record = engine_builds("v2-hayao")
    seeded = {p: p.stat().st_mtime_ns for p in seed_builds("v2-hayao", tmp_path / "home")}
    home = {"ANIPAINT_HOME": str(tmp_path / "home")}
    proc = run_cli("models", "prepare", "v2-hayao", env=home, timeout=1500)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert Path(tmp_path / "home" / "models" / "v2-hayao" / "model.pt").is_file()
    assert {p: p.stat().st_mtime_ns for p in seeded} == seeded  # found, not built again
    [auto] = (tmp_path / "home" / "models" / "v2-hayao" / "engine").glob("auto-*.json")
    assert set(json.loads(auto.read_text())["results"]) == set(record["results"])
    proc = run_cli("convert", str(GROUP_PHOTO), str(tmp_path / "out.png"), "--style", "v2-hayao", env=home)
    assert proc.returncode == 0, proc.stderr
