"""Licences as data, and commercial-only mode through the library, the CLI and the README.

A commercial-only installation offers and paints only the styles whose weights' licence allows commercial use
(the Apache-2.0 CartoonGAN rows); every other style is refused with one sentence that names its licence.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from anipaint import get_painter
from anipaint.errors import LicenceError
from anipaint.models import availability
from anipaint.models.licences import LICENCE_IDS, LICENCES
from anipaint.models.registry import all_styles, get_style
from anipaint.settings import reload_settings
from support.paths import GROUP_PHOTO, REPO
from support.service import commercial_only_server, photo_bytes

COMMERCIAL = [s.id for s in all_styles() if s.licence.commercial]  # the Apache-2.0 rows
NON_COMMERCIAL = [s.id for s in all_styles() if not s.licence.commercial]


@pytest.fixture(scope="module")
def commercial_server(prepared_store, tmp_path_factory):
    with commercial_only_server(tmp_path_factory.mktemp("commercial")) as server:
        yield server


def _commercial_settings():
    return dataclasses.replace(reload_settings(), commercial_only=True)


def _cli(*args: str, commercial_only: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "ANIPAINT_COMMERCIAL_ONLY": "1" if commercial_only else "0"}
    return subprocess.run([sys.executable, "-m", "anipaint.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_every_style_carries_a_licence_from_the_table() -> None:
    for style in all_styles():
        assert style.label and style.description, style.id  # what its card on the page shows
        assert style.licence in LICENCES, style.id
        assert style.licence.id in LICENCE_IDS
        assert style.licence.text and style.licence.source.startswith("https://"), style.id
    assert {lic.id for lic in LICENCES} == set(LICENCE_IDS)
    assert [lic.id for lic in LICENCES if lic.commercial] == ["Apache-2.0"]
    cartoongan = [lic for lic in LICENCES if lic.id == "Apache-2.0"][0]
    assert "anime films" in cartoongan.note


def test_readme_licence_table_names_every_style_with_its_licence() -> None:
    readme = (REPO / "README.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z0-9-]+)` \| [^|]+ \| `?([A-Za-z0-9.-]+)`? \|", readme, re.M))
    for style in all_styles():
        assert rows.get(style.id) == style.licence.id, f"README licence row for {style.id}"
    assert "anime film" in readme


def test_commercial_only_refuses_every_other_style_by_its_licence(prepared_store) -> None:
    settings = _commercial_settings()
    for style_id in NON_COMMERCIAL:
        with pytest.raises(LicenceError, match=rf"'{style_id}'.*licence \({get_style(style_id).licence.id}\)"):
            get_painter(style_id, settings)
    with pytest.raises(LicenceError, match="non-commercial"):
        get_painter("hayao", settings)  # an alias whose every candidate is non-commercial
    offered = [st.style.id for st in availability.style_status(settings)]
    assert offered == COMMERCIAL  # today's table may have none: then nothing at all is offered


def test_default_style_falls_back_to_an_offered_one(prepared_store) -> None:
    settings = _commercial_settings()
    usable = [st.style.id for st in availability.style_status(settings) if st.available]
    if usable:
        assert availability.resolve(None, settings).id == usable[0]
    else:
        with pytest.raises(LicenceError, match="no style available here is cleared for commercial use"):
            availability.resolve(None, settings)
    assert availability.resolve(None, reload_settings()).id == reload_settings().default_style  # off: unchanged


def test_cli_lists_only_offered_styles_and_refuses_the_rest_with_the_library_sentence(prepared_store, tmp_path):
    listed = _cli("styles")
    assert listed.returncode == 0, listed.stderr
    ids = [line.split()[0] for line in listed.stdout.splitlines() if line and line.split()[0] in
           {s.id for s in all_styles()}]
    assert ids == COMMERCIAL
    if not COMMERCIAL:
        assert "no style here is cleared for commercial use" in listed.stdout
    assert all(f"  {s}  " not in listed.stdout for s in NON_COMMERCIAL)

    with pytest.raises(LicenceError) as refused:
        get_painter("v3-cute", _commercial_settings())
    proc = _cli("convert", str(GROUP_PHOTO), str(tmp_path / "out.png"), "--style", "v3-cute")
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"anipaint: error: {refused.value}"
    assert not (tmp_path / "out.png").exists()

    everything = _cli("styles", commercial_only=False)
    assert all(s in everything.stdout for s in NON_COMMERCIAL)
    assert "non-commercial" in everything.stdout  # each line names its licence


@pytest.mark.parametrize("style_id", COMMERCIAL)
def test_commercial_only_paints_the_apache_styles(prepared_store, group_photo, style_id) -> None:
    painter = get_painter(style_id, _commercial_settings())
    out = np.asarray(painter.paint(group_photo, faces=False).convert("RGB"), np.float64)
    photo = np.asarray(group_photo.resize(out.shape[1::-1]), np.float64)
    assert out.shape == (512, 512, 3)
    assert np.abs(out - photo).mean() > 8  # restyled


# -- the HTTP API of a commercial-only server ----------------------------------------------------------------------
def test_api_offers_only_commercial_styles(commercial_server) -> None:
    styles = commercial_server.client.get("/api/styles").json()
    assert [s["id"] for s in styles] == COMMERCIAL
    assert all(s["commercial"] and s["licence"] == "Apache-2.0" and "anime films" in s["licence_text"] for s in styles)
    config = commercial_server.client.get("/api/config").json()
    assert config["commercial_only"] is True
    usable = [s["id"] for s in styles if s["available"]]
    assert config["default_style"] == (usable[0] if usable else None)


@pytest.mark.parametrize("route", ["/api/jobs", "/predict"])
def test_api_refuses_other_styles_with_403_naming_the_licence(commercial_server, route) -> None:
    with pytest.raises(LicenceError) as refused:
        get_painter("v3-cute", _commercial_settings())
    res = commercial_server.client.post(route, files={"image": ("p.jpg", photo_bytes(), "image/jpeg")},
                                        data={"style": "v3-cute"})
    assert res.status_code == 403
    assert res.json() == {"detail": str(refused.value)}
    thumb = commercial_server.client.get("/api/styles/v3-cute/thumbnail")
    assert thumb.status_code == 403 and "non-commercial" in thumb.json()["detail"]


def test_api_default_style_is_an_offered_one(commercial_server) -> None:
    res = commercial_server.submit(photo_bytes(), faces="false")
    if not COMMERCIAL:
        assert res.status_code == 403
        assert "no style available here is cleared for commercial use" in res.json()["detail"]
        return
    assert res.status_code == 202, res.text
    assert commercial_server.wait_job(res.json()["id"], timeout=240)["style"] in COMMERCIAL


@pytest.mark.parametrize("style_id", COMMERCIAL)
def test_api_paints_the_apache_styles(commercial_server, style_id) -> None:
    res = commercial_server.client.post("/predict", files={"image": ("p.jpg", photo_bytes(), "image/jpeg")},
                                        data={"style": style_id, "faces": "false"})
    assert res.status_code == 200, res.text
    assert res.json()["style"] == style_id and res.json()["width"] == 512
