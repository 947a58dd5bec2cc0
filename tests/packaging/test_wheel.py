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
