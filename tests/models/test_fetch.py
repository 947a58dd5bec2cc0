"""`anipaint models fetch` as a user runs it, against a local mirror (http.server in a thread; no internet).

The mirror serves the real model sources (or a copy with one file damaged); the home and the sources folder
are empty temporary folders, so every file the command uses really came over HTTP.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from anipaint.errors import ModelStoreError
from anipaint.models import availability, fetch
from anipaint.models.registry import Source, get_style
from anipaint.models.sources import fetch_source
from anipaint.settings import Settings
from support.mirror import serving
from support.paths import GROUP_PHOTO

V1 = "v1-paprika"  # two files (model.json + weights shard), converts in seconds


def run_cli(*args: str, home: Path, mirror: str, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "ANIPAINT_HOME": str(home), "ANIPAINT_SOURCES": str(home.parent / "no-sources"),
               "ANIPAINT_MIRROR": mirror, **env}
    return subprocess.run([sys.executable, "-m", "anipaint.cli", *args], capture_output=True, text=True,
                          env=environ, timeout=600)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_fetch_from_a_mirror_then_paint(tmp_path, sources):
    home = tmp_path / "home"
    with serving(sources) as mirror:
        proc = run_cli("models", "fetch", V1, home=home, mirror=mirror.url)
        assert proc.returncode == 0, proc.stderr
        for src in get_style(V1).sources:
            assert mirror.requested(src.path) == [None]  # each file came over HTTP, once, whole
            assert sha256(home / "downloads" / src.path) == src.sha256
        again = run_cli("models", "fetch", V1, home=home, mirror=mirror.url)
        assert again.returncode == 0, again.stderr
        assert len(mirror.requests) == 2  # already there and intact: nothing downloaded again
    out = tmp_path / "out.png"
    proc = run_cli("convert", str(GROUP_PHOTO), str(out), "--style", V1, "--max-side", "128", "--no-faces",
                   home=home, mirror="http://127.0.0.1:9/offline")
    assert proc.returncode == 0, proc.stderr
    painted = np.asarray(Image.open(out).convert("RGB"), np.float64)
    photo = np.asarray(Image.open(GROUP_PHOTO).convert("RGB").resize(Image.open(out).size), np.float64)
    assert np.abs(painted - photo).mean() > 8  # restyled


def test_a_cut_transfer_resumes_where_it_stopped(tmp_path, sources):
    home = tmp_path / "home"
    shard = get_style(V1).sources[1]
    size = (sources / shard.path).stat().st_size
    with serving(sources, cut=(shard.path,)) as mirror:
        first = run_cli("models", "fetch", V1, home=home, mirror=mirror.url)
        assert first.returncode != 0
        assert "cut off" in first.stdout and "again to resume" in first.stdout
        assert "Traceback" not in first.stderr
        part = home / "downloads" / (shard.path + ".part")
        assert 0 < part.stat().st_size < size
        second = run_cli("models", "fetch", V1, home=home, mirror=mirror.url)
        assert second.returncode == 0, second.stdout + second.stderr
        assert mirror.requested(shard.path) == [None, f"bytes={size // 2}-"]
    assert sha256(home / "downloads" / shard.path) == shard.sha256
    assert not part.exists()


def test_a_corrupted_file_is_refused_and_nothing_is_left_behind(tmp_path, sources):
    style = get_style("v3-hayao")
    src = style.sources[0]
    bad = tmp_path / "mirror"
    (bad / src.path).parent.mkdir(parents=True)
    data = bytearray((sources / src.path).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (bad / src.path).write_bytes(bytes(data))
    home = tmp_path / "home"
    with serving(bad) as mirror:
        proc = run_cli("models", "fetch", style.id, home=home, mirror=mirror.url)
    assert proc.returncode != 0
    message = proc.stdout + proc.stderr
    assert Path(src.path).name in message
    assert src.sha256 in message and hashlib.sha256(bytes(data)).hexdigest() in message
    assert "Traceback" not in message
    left = [p.name for p in (home / "downloads").rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    assert left == []
    with serving(bad) as mirror:  # the same file met on first use: one line, nothing left
        proc = run_cli("convert", str(GROUP_PHOTO), str(tmp_path / "out.png"), "--style", style.id,
                       home=home, mirror=mirror.url, ANIPAINT_OFFLINE="0")
    assert proc.returncode != 0 and not (tmp_path / "out.png").exists()
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and Path(src.path).name in lines[0] and "checksum" in lines[0], proc.stderr
    left = [p.name for p in (home / "downloads").rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    assert left == []


def test_offline_without_the_default_style_serve_and_convert_say_what_to_run(tmp_path):
    for command in (["serve", "--port", "1"], ["convert", str(GROUP_PHOTO), str(tmp_path / "out.png")]):
        proc = run_cli(*command, home=tmp_path / "home", mirror="", ANIPAINT_OFFLINE="1")
        assert proc.returncode != 0
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "run `anipaint models fetch v3-hayao`" in lines[0], proc.stderr
        assert "offline" in lines[0]
    proc = run_cli("--offline", "convert", str(GROUP_PHOTO), str(tmp_path / "out.png"), home=tmp_path / "home",
                   mirror="", ANIPAINT_OFFLINE="0")
    assert proc.returncode != 0 and "run `anipaint models fetch v3-hayao`" in proc.stderr
    assert not (tmp_path / "out.png").exists()


def test_auto_fetch_downloads_a_missing_style_on_first_use(tmp_path, sources):
    home = tmp_path / "home"
    out = tmp_path / "out.png"
    with serving(sources) as mirror:
        proc = run_cli("convert", str(GROUP_PHOTO), str(out), "--style", V1, "--max-side", "96", "--no-faces",
                       home=home, mirror=mirror.url, ANIPAINT_OFFLINE="0")
        assert proc.returncode == 0, proc.stderr
        assert sorted(path for path, _ in mirror.requests) == sorted(s.path for s in get_style(V1).sources)
    assert Image.open(out).size[0] == 96


def test_a_file_inside_an_npm_package_archive(tmp_path, sources):
    """The segmentation model is published inside an npm tarball: the archive is fetched, the member kept."""
    model = sources / "segmentation" / "selfie_segmentation.tflite"
    if not model.is_file():
        pytest.skip("segmentation model not in the sources")
    site = tmp_path / "site"
    site.mkdir()
    with tarfile.open(site / "selfie.tgz", "w:gz") as tar:
        tar.add(model, arcname="package/selfie_segmentation.tflite")
        readme = b"not the model"
        info = tarfile.TarInfo("package/README.md")
        info.size = len(readme)
        tar.addfile(info, io.BytesIO(readme))
    home = tmp_path / "home"
    settings = Settings(home=home, sources=tmp_path / "none")
    with serving(site) as mirror:
        source = Source("segmentation/selfie_segmentation.tflite", sha256(model),
                        f"{mirror.url}/selfie.tgz#package/selfie_segmentation.tflite")
        path = fetch_source(source, settings)
        wrong = Source("segmentation/other.tflite", sha256(model), f"{mirror.url}/selfie.tgz#package/README.md")
        with pytest.raises(ModelStoreError, match="checksum"):
            fetch_source(wrong, settings)
    assert path == home / "downloads" / source.path and sha256(path) == source.sha256
    assert sorted(p.name for p in path.parent.iterdir() if p.is_file()) == [path.name]  # no archive left


def test_without_a_mirror_a_file_with_no_known_origin_is_named(tmp_path):
    settings = Settings(home=tmp_path / "home", sources=tmp_path / "none", mirror="")
    style = get_style("v3-cute")
    with pytest.raises(ModelStoreError, match="no public origin"):
        fetch.fetch_style(style, settings)


def test_a_savedmodel_style_comes_as_several_files(tmp_path, sources):
    """CartoonGAN's SavedModel: saved_model.pb and its variables/ bundle, each fetched into its own place."""
    style = get_style("cartoongan-shinkai")
    if not (sources / style.sources[0].path).is_file():
        pytest.skip("CartoonGAN sources not here")
    settings = Settings(home=tmp_path / "home", sources=tmp_path / "none")
    with serving(sources) as mirror:
        paths = fetch.fetch_style(style, dataclasses.replace(settings, mirror=mirror.url))
    assert len(paths) == len(style.sources) >= 3
    for src, path in zip(style.sources, paths, strict=True):
        assert path == settings.home / "downloads" / src.path and sha256(path) == src.sha256
    assert any("/variables/" in src.path for src in style.sources)
    status = {st.style.id: st for st in availability.style_status(settings)}[style.id]
    assert status.available and not status.converted


def test_fetch_without_names_gets_every_style_and_the_helper_models(tmp_path, sources):
    settings = Settings(home=tmp_path / "home", sources=tmp_path / "none")
    with serving(sources) as mirror:
        results = fetch.fetch(None, dataclasses.replace(settings, mirror=mirror.url))
    assert results["face-detector"] == "ok" and results["segmenter"] == "ok"
    for style_id, outcome in results.items():
        if style_id.startswith("v2-") and style_id != "v2-hayao":  # the port's files are not in the sources
            assert outcome.startswith("failed") and "HTTP 404" in outcome
        else:
            assert outcome == "ok", (style_id, outcome)
    usable = {st.style.id for st in availability.style_status(settings) if st.available}
    assert {"v3-hayao", "v2-hayao", "v1-paprika", "whitebox"} <= usable


def test_a_server_on_an_empty_home_fetches_its_default_style_before_it_is_ready(tmp_path, sources):
    from support.service import photo_bytes, running_server

    with serving(sources) as mirror:
        with running_server(tmp_path, home=tmp_path / "home", sources=tmp_path / "no-sources", mirror=mirror.url,
                            offline=0, background="off", default_style="v3-cute") as server:
            wanted = {src.path for src in get_style("v3-cute").sources}
            assert {path for path, _ in mirror.requests} == wanted  # fetched before /readyz said ready
            res = server.client.post("/predict", files={"image": ("p.jpg", photo_bytes(), "image/jpeg")},
                                     data={"faces": "false"})
            assert res.status_code == 200, res.text
            assert res.json()["style"] == "v3-cute"


def test_two_processes_painting_a_missing_style_at_once_download_it_once(tmp_path, sources):
    """Two first uses at the same moment (two CLI runs sharing a home): one downloads, the other waits and uses it."""
    home = tmp_path / "home"
    env = {**os.environ, "ANIPAINT_HOME": str(home), "ANIPAINT_SOURCES": str(tmp_path / "no-sources"),
           "ANIPAINT_OFFLINE": "0"}
    with serving(sources) as mirror:
        env["ANIPAINT_MIRROR"] = mirror.url
        runs = [subprocess.Popen([sys.executable, "-m", "anipaint.cli", "convert", str(GROUP_PHOTO),
                                  str(tmp_path / f"out{i}.png"), "--style", V1, "--max-side", "64", "--no-faces"],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (1, 2)]
        for run in runs:
            _, err = run.communicate(timeout=600)
            assert run.returncode == 0, err
        for src in get_style(V1).sources:
            assert mirror.requested(src.path) == [None], src.path
    assert Image.open(tmp_path / "out1.png").size == Image.open(tmp_path / "out2.png").size
