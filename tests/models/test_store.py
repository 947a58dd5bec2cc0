"""The model store: idempotent and concurrent prepare, checksums, aliases, fetch of the port's unchecked files."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from anipaint.errors import ModelStoreError, StyleError
from anipaint.models import availability, fetch, stamp, store
from anipaint.models.registry import get_style
from anipaint.settings import get_settings
from support.mirror import serving


def _settings(home: Path, sources: Path | None = None):
    return dataclasses.replace(get_settings(), home=home, sources=sources or get_settings().sources)


def test_prepare_twice_is_a_no_op(tmp_path, sources):
    s = _settings(tmp_path / "home")
    first = store.convert(["v1-paprika"], s)
    assert first["v1-paprika"] == "ok"
    artefact = store.artefact_path(get_style("v1-paprika"), s)
    mtime = artefact.stat().st_mtime_ns
    second = store.convert(["v1-paprika"], s)
    assert second["v1-paprika"] == "ok"
    assert artefact.stat().st_mtime_ns == mtime  # not converted again
    assert store.is_converted(get_style("v1-paprika"), s)


def test_artefacts_converted_by_other_code_are_rebuilt(tmp_path, sources, monkeypatch):
    """A store made by an older anipaint (other importer code) is converted again, keeping engine builds."""
    s = _settings(tmp_path / "home")
    style = get_style("v1-paprika")
    assert store.convert(["v1-paprika"], s)["v1-paprika"] == "ok"
    engine_dir = store.style_dir(style, s) / "engine"
    engine_dir.mkdir()
    (engine_dir / "kept.pt2").write_bytes(b"build keyed by the artefact's checksum")
    mtime = store.artefact_path(style, s).stat().st_mtime_ns
    monkeypatch.setattr(stamp, "converter_digest", lambda: "0123456789abcdef")  # "the code changed"
    assert not store.is_converted(style, s)
    assert store.convert(["v1-paprika"], s)["v1-paprika"] == "ok"
    assert store.artefact_path(style, s).stat().st_mtime_ns != mtime
    assert store.is_converted(style, s)
    assert (engine_dir / "kept.pt2").is_file()


# One style per importer: TFLite graph, TF GraphDef (.pb), ONNX, White-box's TFLite, SavedModel, tfjs v1, v2's TFLite.
ONE_PER_IMPORTER = ("v3-hayao", "v3-shinkai", "v3-cute", "whitebox", "cartoongan-shinkai", "v1-hayao", "v2-hayao")


def test_every_importer_converts_to_the_same_bytes_in_any_process(tmp_path, sources):
    """Engine builds are keyed by the converted file's checksum, so a conversion made anew (new importer code, a
    second store) must give the same bytes, or every build of the style is made again. Python hashes strings
    differently in every process; two processes with two hash seeds must agree."""
    digests = []
    for seed in ("1", "2"):
        home = tmp_path / f"home-{seed}"
        proc = subprocess.run([sys.executable, "-m", "anipaint.cli", "models", "prepare", *ONE_PER_IMPORTER,
                               "--no-engine"], capture_output=True, text=True, timeout=600,
                              env={**os.environ, "ANIPAINT_HOME": str(home), "PYTHONHASHSEED": seed})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        settings = _settings(home)
        digests.append({i: hashlib.sha256(store.artefact_path(get_style(i), settings).read_bytes()).hexdigest()
                        for i in ONE_PER_IMPORTER})
    assert {i for i in ONE_PER_IMPORTER if digests[0][i] != digests[1][i]} == set()


def test_prepare_concurrently_from_two_processes(tmp_path, sources):
    env = {**os.environ, "ANIPAINT_HOME": str(tmp_path / "home")}
    cmd = [sys.executable, "-m", "anipaint.cli", "models", "prepare", "v2-hayao", "v1-shinkai", "--no-engine"]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for _ in range(2)]
    outputs = [p.communicate(timeout=600)[0].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    models = tmp_path / "home" / "models"
    leftovers = [p.name for p in models.iterdir() if p.name.startswith(".") and p.is_dir()]
    assert leftovers == []  # no half-written temporary folders
    from anipaint.networks.animeganv2 import Generator

    Generator().load_state_dict(torch.load(models / "v2-hayao" / "model.pt", weights_only=True), strict=True)


def test_checksum_mismatch_is_reported_not_converted(tmp_path, sources):
    bad = tmp_path / "sources"
    shutil.copytree(sources / "animegan_v1" / "hayao", bad / "animegan_v1" / "hayao")
    shard = bad / "animegan_v1" / "hayao" / "group1-shard1of1.bin"
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF
    shard.chmod(0o644)
    shard.write_bytes(bytes(data))
    s = _settings(tmp_path / "home", bad)
    results = store.convert(["v1-hayao", "v1-shinkai"], s)
    assert results["v1-hayao"].startswith("failed") and "checksum mismatch" in results["v1-hayao"]
    assert results["v1-shinkai"].startswith("skipped")
    statuses = {st.style.id: st for st in availability.style_status(s)}
    assert not statuses["v1-shinkai"].available and "source missing" in statuses["v1-shinkai"].reason


def test_aliases_resolve_to_their_one_style(tmp_path, sources):
    s = dataclasses.replace(_settings(tmp_path / "home"), offline=True)
    assert availability.resolve("hayao", s).id == "v3-hayao"
    assert availability.resolve("shinkai", s).id == "v3-shinkai"
    assert availability.resolve("V1_Strange_Daddy", s).id == "v1-strange-daddy"
    with pytest.raises(StyleError, match="unknown style"):
        availability.resolve("van-gogh", s)
    if (s.sources / get_style("v2-paprika").sources[0].path).is_file():
        pytest.skip("the port's paprika.pt is here")
    with pytest.raises(StyleError, match="run `anipaint models fetch v2-paprika`"):
        availability.resolve("paprika", s)  # the port's file is missing: never v1-paprika instead


def test_fetch_of_a_port_file_resumes_and_converts(tmp_path, prepared_store):
    """A port .pt file has no published checksum: it is trusted once it converts, and a cut transfer resumes."""
    site = tmp_path / "site"
    site.mkdir()
    # A real PyTorch-port-format file: the converted v2 Hayao state dict under the port's key names.
    shutil.copy(prepared_store / "v2-hayao" / "model.pt", site / "face_paint_512_v2.pt")
    size = (site / "face_paint_512_v2.pt").stat().st_size
    s = _settings(tmp_path / "home")
    style = get_style("v2-face-paint-512-v2")
    with serving(site, cut=("face_paint_512_v2.pt",)) as mirror:
        url = f"{mirror.url}/face_paint_512_v2.pt"
        with pytest.raises(ModelStoreError, match="again to resume"):
            fetch.fetch_style(style, s, url=url, timeout=5)
        part = s.home / "downloads" / "animegan2-pytorch" / "face_paint_512_v2.pt.part"
        assert 0 < part.stat().st_size < size
        [path] = fetch.fetch_style(style, s, url=url, timeout=5)
        assert mirror.requested("face_paint_512_v2.pt") == [None, f"bytes={size // 2}-"]
    assert path.read_bytes() == (site / "face_paint_512_v2.pt").read_bytes()
    assert not part.exists()
    assert availability.resolve("face-paint", s).id == "v2-face-paint-512-v2"
    from anipaint import get_painter

    img = get_painter("v2-face-paint-512-v2", s).paint(_tiny(), faces=False)
    assert img.size == (64, 48)


def _tiny():
    from PIL import Image

    return Image.new("RGB", (64, 48), (200, 120, 90))


def test_fetch_rejects_a_file_that_is_not_a_port_state_dict(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    torch.save({"conv.weight": torch.zeros(3)}, site / "paprika.pt")
    s = _settings(tmp_path / "home")
    with serving(site) as mirror, pytest.raises(ModelStoreError, match="v2-paprika"):
        fetch.fetch_style(get_style("v2-paprika"), s, url=f"{mirror.url}/paprika.pt", timeout=5)
    assert not (s.home / "downloads" / "animegan2-pytorch" / "paprika.pt").exists()


def test_models_add_uses_a_file_the_user_has(tmp_path, prepared_store):
    import subprocess
    import sys

    env = {**os.environ, "ANIPAINT_HOME": str(tmp_path / "home")}
    mine = tmp_path / "celeba_distill.pt"
    shutil.copy(prepared_store / "v2-hayao" / "model.pt", mine)  # a real state dict in the port's key names
    proc = subprocess.run([sys.executable, "-m", "anipaint.cli", "models", "add", str(mine)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "v2-celeba-distill" in proc.stdout
    styles = subprocess.run([sys.executable, "-m", "anipaint.cli", "styles"], capture_output=True, text=True,
                            env=env, timeout=120).stdout
    line = next(ln for ln in styles.splitlines() if ln.startswith("v2-celeba-distill"))
    assert " ready " in line and "paints with the plain engine" in line  # converted; fast engine not built

    junk = tmp_path / "paprika.pt"
    junk.write_bytes(b"not a checkpoint")
    proc = subprocess.run([sys.executable, "-m", "anipaint.cli", "models", "add", str(junk)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2 and "v2-paprika" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "home" / "downloads" / "animegan2-pytorch" / "paprika.pt").exists()
