"""The package outside this checkout: a wheel installed into a fresh virtual environment in a temporary folder
fetches its model from a local mirror and serves the page.

For speed the new environment gets the already-installed dependencies through a ``.pth`` line naming this
environment's site-packages (a plain path line: the editable install's finder there is not run), and the wheel
is installed with ``--no-deps``; ``import anipaint`` must then come from the new environment, not the checkout.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import httpx
import pytest
from PIL import Image

from support.mirror import serving
from support.paths import REPO
from support.service import free_port


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANIPAINT_") and k != "PYTHONPATH"}
    return {**env, **extra}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A venv outside the checkout with the wheel built from this checkout installed in it."""
    work = tmp_path_factory.mktemp("wheel")
    tree = work / "src"
    keep = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout.split()
    for rel in keep:  # the checkout's files, without build leftovers, so the build writes nothing here
        if (REPO / rel).is_file():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, tree / rel)
    subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(work / "dist")], cwd=tree, check=True, timeout=300, env=_clean_env())
    [wheel] = (work / "dist").glob("anipaint-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "anipaint/service/static/app.js" in names and "anipaint/service/static/index.html" in names
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(subprocess.run([venv / "bin" / "python", "-c", where], capture_output=True, text=True,
                               check=True).stdout.strip())
    (site / "_deps_from_test_env.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", str(wheel)], check=True, timeout=300, env=_clean_env())
    return venv


def test_the_wheel_imports_from_its_own_environment(installed, tmp_path):
    home = tmp_path / "home"
    probe = ("import anipaint, anipaint.settings as s; print(anipaint.__file__); "
             "print(s.checkout_root()); print(s.get_settings().sources)")
    out = subprocess.run([installed / "bin" / "python", "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                         env=_clean_env(ANIPAINT_HOME=str(home)), timeout=120, check=True).stdout.split("\n")
    assert Path(out[0]).is_relative_to(installed)  # not the checkout
    assert out[1] == "None"
    assert Path(out[2]) == home / "downloads"  # not ../shared: an installed package reads its own downloads


def test_the_wheel_fetches_from_a_mirror_and_serves_the_page(installed, tmp_path, sources):
    home = tmp_path / "home"
    env = _clean_env(ANIPAINT_HOME=str(home))
    with serving(sources) as mirror:
        fetch = subprocess.run([installed / "bin" / "anipaint", "models", "fetch", "v3-hayao"], cwd=tmp_path,
                               capture_output=True, text=True, env={**env, "ANIPAINT_MIRROR": mirror.url}, timeout=300)
    assert fetch.returncode == 0, fetch.stderr
    port = free_port()
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen([installed / "bin" / "anipaint", "serve", "--port", str(port)], cwd=tmp_path,
                              env={**env, "ANIPAINT_BACKGROUND": "off", "ANIPAINT_LOG_LEVEL": "warning"},
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            deadline = time.monotonic() + 180
            while True:
                assert server.poll() is None, (tmp_path / "server.log").read_text()
                try:
                    if client.get("/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.3)
            assert client.get("/").status_code == 200
            script = client.get("/static/app.js")
            assert script.status_code == 200 and len(script.content) > 1000
            buf = io.BytesIO()
            Image.new("RGB", (96, 64), (180, 120, 90)).save(buf, format="PNG")
            res = client.post("/predict", files={"image": ("p.png", buf.getvalue(), "image/png")},
                              data={"faces": "false"})
            assert res.status_code == 200, res.text
            assert res.json()["style"] == "v3-hayao" and res.json()["width"] == 96
    finally:
        server.terminate()
        server.wait(30)
        log.close()


# Distributions the extras bring (and what they alone pull in): hidden from the environment without extras.
EXTRAS_ONLY = ("fastapi", "starlette", "uvicorn", "multipart", "python_multipart", "prometheus_client",
               "fastapi_offline", "celery", "kombu", "billiard", "vine", "amqp", "redis", "watchdog")


@pytest.fixture(scope="module")
def installed_bare(installed, tmp_path_factory) -> Path:
    """The same wheel in a second environment that sees this one's packages but none of the extras', as
    ``pip install anipaint`` without extras leaves it."""
    work = tmp_path_factory.mktemp("bare")
    view = work / "site-view"
    view.mkdir()
    for entry in Path(sysconfig.get_path("purelib")).iterdir():
        name = entry.name.lower().replace("-", "_")
        if name.startswith(EXTRAS_ONLY) or name.startswith(("anipaint", "__editable__", "_deps_from")):
            continue
        (view / entry.name).symlink_to(entry)
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(subprocess.run([venv / "bin" / "python", "-c", where], capture_output=True, text=True,
                               check=True).stdout.strip())
    (site / "_deps_without_extras.pth").write_text(str(view) + "\n")
    [wheel] = (installed.parent / "dist").glob("anipaint-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", str(wheel)], check=True, timeout=300, env=_clean_env())
    return venv


def test_without_extras_the_wheel_paints_from_the_cli_and_python_fetching_its_style(installed_bare, tmp_path,
                                                                                     sources):
    """A fresh user's first ten minutes: no extras, an empty home, the default style fetched on first use."""
    env = _clean_env(ANIPAINT_HOME=str(tmp_path / "home"))
    Image.open(sources.parent / "samples" / "group_pakutaso.jpg").convert("RGB").resize((320, 240)).save(
        tmp_path / "me.jpg", quality=92)
    run = {"cwd": tmp_path, "capture_output": True, "text": True, "timeout": 600}
    probe = "import fastapi"
    assert subprocess.run([installed_bare / "bin" / "python", "-c", probe], env=env, **run).returncode != 0
    with serving(sources) as mirror:
        proc = subprocess.run([installed_bare / "bin" / "anipaint", "convert", "me.jpg", "me-anime.png"],
                              env={**env, "ANIPAINT_MIRROR": mirror.url}, **run)
        assert proc.returncode == 0, proc.stderr
        assert {path for path, _ in mirror.requests} == {"animeganv3/AnimeGANv3_Hayao_36_QUANTIZED_fp16.tflite"}
    assert Image.open(tmp_path / "me-anime.png").size == (320, 240)
    script = ("import io, numpy as np, anipaint; from PIL import Image\n"
              "p = anipaint.paint('me.jpg', faces=False); assert isinstance(p, Image.Image), type(p)\n"
              "b = anipaint.paint(open('me.jpg', 'rb').read(), faces=False); assert b[:4] == b'\\x89PNG'\n"
              "a = np.asarray(Image.open('me.jpg')); out = anipaint.paint(a, faces=False)\n"
              "assert out.shape == a.shape and out.dtype == np.uint8\n"
              "print(sorted(s.status for s in anipaint.styles())[0], len(anipaint.styles()))")
    proc = subprocess.run([installed_bare / "bin" / "python", "-c", script], env={**env, "ANIPAINT_OFFLINE": "1"},
                          **run)
    assert proc.returncode == 0, proc.stderr
    serve = subprocess.run([installed_bare / "bin" / "anipaint", "serve", "--port", "1"], env=env, **run)
    assert serve.returncode != 0
    assert serve.stderr.strip().splitlines() == [
        "anipaint: error: anipaint serve needs anipaint's serve extra (fastapi, uvicorn, multipart, "
        "prometheus_client, fastapi_offline not installed): pip install 'anipaint[serve]'"]
    offline = subprocess.run([installed_bare / "bin" / "anipaint", "convert", "me.jpg", "again.png"],
                             env=_clean_env(ANIPAINT_HOME=str(tmp_path / "empty"), ANIPAINT_OFFLINE="1"), **run)
    assert offline.returncode != 0 and len(offline.stderr.strip().splitlines()) == 1
    assert "run `anipaint models fetch v3-hayao`" in offline.stderr
